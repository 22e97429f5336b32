from django.urls import path

from . import views

app_name = "demo"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("chat/history/", views.chat_history, name="history"),
    path("chat/send/", views.chat_send, name="send"),
    path("chat/edit/", views.chat_edit, name="edit"),
]
