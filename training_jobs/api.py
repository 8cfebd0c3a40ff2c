"""Training over the API: datasets, runs, checkpoints and servers, on the site's one router."""


def register(router) -> None:
    pass
