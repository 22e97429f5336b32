"""The store's threads: which thread runs a store call made from async code
(:mod:`.dispatch`), the store's own thread pool (:mod:`.pool`), and the
appends queued together that run as one group (:mod:`.group_commit`)."""
