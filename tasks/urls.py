app_name = "tasks"
urlpatterns = []
