"""Template tags of the review's measures: {% planted_reveal candidate user as reveal %} (review.planting)."""

from django import template

from review import planting

register = template.Library()


@register.simple_tag
def planted_reveal(candidate, user):
    """What a planted candidate was, once `user` accepted or rejected it (or it is closed); else None."""
    if candidate is None:
        return None
    return planting.revelation(candidate, user)
