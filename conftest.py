pytest_plugins = ["clawgym_site.testing", "jobs.testing", "llm.testing", "sandbox.testing"]
