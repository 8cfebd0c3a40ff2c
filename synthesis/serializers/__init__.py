"""The synthesis API's serializers, one module per area, as synthesis.api: batches and their items, seeds (personas
and skills), and quality assessments."""
