"""Django-backed history for other agent frameworks.

- :mod:`anvia_django.integrations.openai_agents`: a ``Session`` for the OpenAI
  Agents SDK (``pip install "anvia-django[openai-agents]"``).
- :mod:`anvia_django.integrations.langchain`: a ``BaseChatMessageHistory`` for
  LangChain (``pip install "anvia-django[langchain]"``).
- :mod:`anvia_django.integrations.pydantic_ai`: a ``DjangoMemory`` capability
  for Pydantic AI agents (``pip install "anvia-django[pydantic-ai]"``).

All store into the same tables as :class:`~anvia_django.store.DjangoMemoryStore`,
through :mod:`anvia_django.persistence`, so their conversations show in the
admin and the inspector API like any other. This package imports no
framework; each submodule imports its own.
"""
