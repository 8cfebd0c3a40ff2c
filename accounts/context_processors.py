from .roles import ADMIN, LEAD, REVIEWER, has_role, user_role


def roles(request):
    user = getattr(request, "user", None)
    return {
        "user_role": user_role(user),
        "is_reviewer": has_role(user, REVIEWER),
        "is_lead": has_role(user, LEAD),
        "is_admin": has_role(user, ADMIN),
    }
