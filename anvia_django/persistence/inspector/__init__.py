"""The inspector's queries (the admin, the API, the commands): lists, pages,
search, filters and the keyset they page by."""
