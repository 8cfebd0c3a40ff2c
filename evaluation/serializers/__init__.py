"""The evaluation API's serializers, one module per area, as evaluation.api: rollouts and evaluation runs."""
