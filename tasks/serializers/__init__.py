"""The tasks API's serializers, one module per area, as tasks.api: tasks with their revisions and files, sanity
reports, and category proposals.

Serializers only validate and present; every change goes through tasks.services.
"""
