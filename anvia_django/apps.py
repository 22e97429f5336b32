from django.apps import AppConfig


class AnviaDjangoConfig(AppConfig):
    name = "anvia_django"
    label = "anvia_django"
    verbose_name = "Agent memory"
    # Pinned so a host project's DEFAULT_AUTO_FIELD never creates migrations here.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate, pre_migrate

        from . import checks, fields
        from .migration_guards import refuse_unsafe_reversals
        from .persistence.codec import codec_for
        from .persistence.dialects import forget_missing_functions
        from .persistence.dialects.checkpoints import forget_missing_checkpoint_functions
        from .persistence.dialects.collation import exact_collation

        checks.register()
        # The models and their fields ask these of the persistence code,
        # which imports them: so they are handed over here.
        fields.codec_for = codec_for
        fields.exact_collation = exact_collation
        # A process that appended (or stored a LangGraph checkpoint) before
        # ``migrate`` created the functions looks for them again.
        post_migrate.connect(forget_missing_functions, sender=self)
        post_migrate.connect(forget_missing_checkpoint_functions, sender=self)
        pre_migrate.connect(refuse_unsafe_reversals, sender=self)
