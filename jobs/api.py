def register(router):
    pass
