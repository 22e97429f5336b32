"""Django-backed history for other agent frameworks.

- :mod:`anvia_django.integrations.openai_agents`: a ``Session`` for the OpenAI
  Agents SDK (``pip install "anvia-django[openai-agents]"``).
- :mod:`anvia_django.integrations.langchain`: a ``BaseChatMessageHistory`` for
  LangChain (``pip install "anvia-django[langchain]"``).

Both store into the same tables as :class:`~anvia_django.store.DjangoMemoryStore`,
through :mod:`anvia_django.persistence`, so their conversations show in the
admin and the inspector API like any other. This package imports neither
framework; each submodule imports its own.
"""
