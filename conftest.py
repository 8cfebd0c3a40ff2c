pytest_plugins = ["clawgym_site.testing", "clawgym_site.browser_testing", "jobs.testing", "llm.testing", "sandbox.testing"]
