"""ASGI entry point: ``uvicorn example_project.asgi:application``.

Under ASGI the chat page's async view awaits the agent without tying up a
worker thread; the ORM calls inside the store still run in threads.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

application = get_asgi_application()
