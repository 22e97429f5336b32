"""The read-only inspector API (DRF), mounted by :mod:`anvia_django.urls`."""
