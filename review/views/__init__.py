"""The reviewers' pages, one module per area; each module lists its own `urlpatterns` (review/urls.py joins them).

queue       the candidate queue: filters, counts, claims, keyboard triage, "diagnose all"
candidate   one candidate: files, checker, rubric, sanity, the LLM's issues, edits, decisions, history
            (candidate_parts: what that page is built from; it has no urls)
benchmarks  benchmarks, freezing and exporting their versions
quality     quality sampling: random draws of tasks rated on four dimensions
difficulty  difficulty filtering: a benchmark's thresholds and filters, a candidate's rerun
"""
