"""State changes of training, called by the pages, the API and the commands alike:

    runs      start a run of any kind (training_jobs.kinds), cancel, resume from its last checkpoint, clone
    datasets  build a training dataset from rollouts (selection, filters, the contamination guard, splits)

Base models (training_jobs.base_models), checkpoint servers (training_jobs.serving) and checkpoint evaluations
(training_jobs.evaluations) keep their services beside the gpu jobs that carry them out.
"""
