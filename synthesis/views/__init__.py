"""The synthesis pages, one module per area (synthesis/urls.py routes them):
- batches: the list, starting one (or its preview), one batch's progress and funnel, one item;
- seeds: personas (search, import) and skills (labels, override, bundled import, annotation as a job);
- qa: the quality-assessment card of a task revision (fetched into the task page).
"""
