from django.apps import AppConfig


class AnviaDjangoConfig(AppConfig):
    name = "anvia_django"
    label = "anvia_django"
    verbose_name = "Agent memory"
    # Pinned so a host project's DEFAULT_AUTO_FIELD never creates migrations here.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks

        checks.register()
