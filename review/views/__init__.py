"""The reviewers' pages, one module per area; review/urls.py lists every route and review/forms.py every form.

queue       the candidate queue: filters, counts, claims, keyboard triage, bulk decisions, "diagnose all"
candidate   one candidate: files, checker, rubric, sanity, the LLM's issues, edits, decisions, history
            (candidate_parts: what that page is built from; it has no routes)
solve       one candidate's solve panel: the reviewer's scratch workspace, running the checker on it
benchmarks  benchmarks, freezing and exporting their versions
quality     quality sampling: random draws of tasks rated on four dimensions
propose     proposing one task to a benchmark
difficulty  difficulty filtering: a benchmark's thresholds and filters, a candidate's rerun
team        a benchmark's review team, the next candidate to review, adjudication
measures    diagnosis measures: the LLM's precision, planted flaws
"""
