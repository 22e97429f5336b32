"""The demo: an order-support agent with durable memory and a chat page."""
