"""Postprocessing of the API's OpenAPI schema (drf-spectacular's POSTPROCESSING_HOOKS).

A 400 of this API is one of two shapes: a refusal the view words itself, {"detail": "..."} (jobs.api_actions), or the
field errors of a serializer that did not validate, {"field": ["message", ...], "list_field": {"0": [...]}}. Views
document the first under a name of their own (detail_error); this hook adds the second to every documented 400, so
that the schema says what a client really gets (bench/fuzz_api.py checks every answer against it).
"""

FIELD_ERRORS = "FieldErrors"
FIELD_ERRORS_SCHEMA = {
    "type": "object",
    "description": "A request that did not validate: each field's messages (a list), or a nested field's, by key.",
    "additionalProperties": {"anyOf": [{"type": "array", "items": {}}, {"type": "object"}]},
}


def bad_requests_name_fields(result, generator, request, public):
    result.setdefault("components", {}).setdefault("schemas", {})[FIELD_ERRORS] = FIELD_ERRORS_SCHEMA
    reference = {"$ref": f"#/components/schemas/{FIELD_ERRORS}"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            content = operation.get("responses", {}).get("400", {}).get("content", {}).get("application/json")
            if content and "schema" in content and content["schema"] != reference:
                content["schema"] = {"anyOf": [content["schema"], reference]}
    return result
