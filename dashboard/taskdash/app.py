"""The dashboard's pages and actions (Starlette): every read and write is a call to the data
plane's gRPC API (ListTools, GetQueueStats, ListToolOutcomes, ListTasks, GetTask,
ListTaskEvents, WatchTaskEvents, and the queue-control RPCs when the data plane has them)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from taskworker.connect import ChannelSettings, open_channel

from .auth import SESSION_COOKIE, SESSION_SECONDS, Authenticator, Role

HERE = Path(__file__).resolve().parent
STATUSES = ("queued", "processing", "completed", "failed", "dispatched")

# The queue-control RPCs (cancel, retry, pause, resume): shown and served only when the data
# plane's stubs have them. (action, RPC, request message, id field, what the id names)
ACTIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("cancel", "CancelTask", "CancelTaskRequest", "task_id", "task"),
    ("retry", "RetryTask", "RetryTaskRequest", "task_id", "task"),
    ("pause", "PauseTool", "PauseToolRequest", "tool_id", "tool"),
    ("resume", "ResumeTool", "ResumeToolRequest", "tool_id", "tool"),
)
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.UNAUTHENTICATED: 502,  # the dashboard's own credential was refused
    grpc.StatusCode.PERMISSION_DENIED: 502,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def available_actions() -> dict[str, tuple[str, str, str, str]]:
    return {a: (rpc, req, fld, kind) for a, rpc, req, fld, kind in ACTIONS if hasattr(pb, req)}


@dataclass
class DashboardConfig:
    data_plane_addr: str = "127.0.0.1:50051"
    channel_settings: ChannelSettings = field(default_factory=ChannelSettings)
    listen_host: str = "127.0.0.1"
    admin_tokens: list[str] = field(default_factory=list)
    read_tokens: list[str] = field(default_factory=list)
    #: No actions for anyone, whatever their token.
    read_only: bool = False
    page_size: int = 50
    #: The queues page's throughput and failure rate are over this window.
    outcome_window_seconds: int = 3600
    rpc_timeout: float = 5.0


class Dashboard:
    def __init__(self, cfg: DashboardConfig) -> None:
        self.cfg = cfg
        self.auth = Authenticator.create(cfg.admin_tokens, cfg.read_tokens, cfg.listen_host)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters.update(when=_when, age=_age, status=_status)
        self.stub: Any = None
        self.actions = available_actions()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with open_channel(self.cfg.data_plane_addr, self.cfg.channel_settings) as channel:
            self.stub = task_pb2_grpc.GenerationDataServiceStub(channel)
            yield

    async def call(self, rpc: str, request: Any) -> Any:
        return await getattr(self.stub, rpc)(request, timeout=self.cfg.rpc_timeout)

    # -- who is asking ------------------------------------------------------------------------
    def role(self, request: Request) -> Role | None:
        if self.auth.open:
            return "admin"
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            return self.auth.role_of_token(header[7:].strip())
        cookie = request.cookies.get(SESSION_COOKIE)
        return self.auth.role_of_session(cookie) if cookie else None

    def may_act(self, role: Role | None) -> bool:
        return role == "admin" and not self.cfg.read_only

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        role = self.role(request)
        cookie = request.cookies.get(SESSION_COOKIE, "")
        context.update(
            role=role,
            may_act=self.may_act(role),
            actions=self.actions,
            csrf=self.auth.csrf_for(cookie or "open"),
            open=self.auth.open,
            read_only=self.cfg.read_only,
        )
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    # -- pages --------------------------------------------------------------------------------
    async def queues(self, request: Request) -> Response:
        tools, stats, outcomes = await asyncio.gather(
            self.call("ListTools", pb.ListToolsRequest()),
            self.call("GetQueueStats", pb.GetQueueStatsRequest()),
            self.call("ListToolOutcomes", pb.ListToolOutcomesRequest(window_seconds=self.cfg.outcome_window_seconds)),
        )
        rows: dict[str, dict[str, Any]] = {
            t.id: {"tool": t, "queued": 0, "processing": 0, "oldest": 0.0, "completed": 0, "failed": 0, "rate": None}
            for t in tools.tools
        }
        for s in stats.stats:
            row = rows.get(s.tool_id)
            if row is None:
                continue
            row[_status(s.status)] = s.tasks
            if s.status == pb.TASK_STATUS_QUEUED:
                row["oldest"] = s.oldest_age_seconds
        for o in outcomes.tools:
            if o.tool_id in rows:
                rows[o.tool_id].update(completed=o.completed, failed=o.failed, rate=o.failure_rate)
        return self.page(
            request, "queues.html", rows=list(rows.values()), window_minutes=self.cfg.outcome_window_seconds // 60
        )

    async def tasks(self, request: Request) -> Response:
        q = request.query_params
        tools = (await self.call("ListTools", pb.ListToolsRequest())).tools
        req = pb.ListTasksRequest(page_size=self.cfg.page_size, page_token=q.get("page_token", ""))
        if q.get("tool"):
            req.tool_id = q["tool"]
        if q.get("status") in STATUSES:
            req.status = pb.TaskStatus.Value("TASK_STATUS_" + q["status"].upper())
        if q.get("error"):
            req.error_contains = q["error"]
        for name, target in (("after", req.created_after), ("before", req.created_before)):
            if q.get(name):
                try:
                    target.FromDatetime(datetime.fromisoformat(q[name]).replace(tzinfo=None))
                except ValueError:
                    return self.page(request, "error.html", 400, message=f"{name}: not a date and time")
        page = await self.call("ListTasks", req)
        listed, token = page.tasks, page.next_page_token
        keep = {k: v for k, v in q.items() if k != "page_token" and v}
        return self.page(
            request,
            "tasks.html",
            tasks=listed,
            tools=tools,
            names={t.id: t.name for t in tools},
            filters=keep,
            statuses=STATUSES,
            next_query=_query({**keep, "page_token": token}) if token else "",
            first_query=_query(keep) if q.get("page_token") else "",
        )

    async def task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        task = (await self.call("GetTask", pb.GetTaskRequest(task_id=task_id))).task
        events = (await self.call("ListTaskEvents", pb.ListTaskEventsRequest(task_id=task_id, limit=500))).events
        tools = (await self.call("ListTools", pb.ListToolsRequest())).tools
        return self.page(
            request,
            "task.html",
            task=task,
            tool_name={t.id: t.name for t in tools}.get(task.tool_id, ""),
            events=events,
            input=_pretty(task.input),
            output=_pretty(task.output) if task.HasField("output") else None,
            usage=_pretty(task.reported_usage) if task.HasField("reported_usage") else None,
            last_seq=events[-1].seq if events else 0,
        )

    async def events_json(self, request: Request) -> Response:
        """A task's events after `after` (the live view's catch-up after each ring)."""
        task_id = request.path_params["task_id"]
        after = int(request.query_params.get("after", "0") or 0)
        events = (
            await self.call("ListTaskEvents", pb.ListTaskEventsRequest(task_id=task_id, after_seq=after, limit=500))
        ).events
        return JSONResponse([_event_json(e) for e in events])

    async def events_stream(self, request: Request) -> Response:
        """Server-sent events: `ready` once the data plane listens, then one `ring` per
        WatchTaskEvents answer for this task; on each the page asks events_json for what is new.
        A comment every 15 s keeps proxies from closing it."""
        task_id = request.path_params["task_id"]
        call = self.stub.WatchTaskEvents(pb.WatchTaskEventsRequest(task_ids=[task_id]))

        async def rings() -> AsyncIterator[str]:
            try:
                yield ": connecting\n\n"
                # The data plane sends initial metadata once it LISTENs: an event committed after
                # this rings, so the page catches up on `ready` (not on the connection opening,
                # which would leave a gap where an event neither rings nor is caught up).
                await call.initial_metadata()
                yield "event: ready\ndata: {}\n\n"
                iterator = call.__aiter__()
                while True:
                    try:
                        await asyncio.wait_for(iterator.__anext__(), 15)
                    except TimeoutError:
                        yield ": still here\n\n"
                        continue
                    except StopAsyncIteration:
                        return
                    yield "event: ring\ndata: {}\n\n"
            finally:
                call.cancel()

        return StreamingResponse(rings(), media_type="text/event-stream", headers={"cache-control": "no-store"})

    # -- actions ------------------------------------------------------------------------------
    async def act(self, request: Request) -> Response:
        action, target = request.path_params["action"], request.path_params["target"]
        role = self.role(request)
        if action not in self.actions:
            return self.page(request, "error.html", 404, message=f"no action {action} on this data plane")
        if not self.may_act(role):
            return self.page(request, "error.html", 403, message="read-only: this dashboard or token may not act")
        form = await request.form()
        # A bearer header cannot be sent by another site's form; a cookie (or an open dashboard) can.
        by_header = request.headers.get("authorization", "").lower().startswith("bearer ")
        expected = self.auth.csrf_for(request.cookies.get(SESSION_COOKIE) or "open")
        if not by_header and form.get("csrf") != expected:
            return self.page(request, "error.html", 403, message="the form is stale: reload the page and try again")
        rpc, req_name, fld, kind = self.actions[action]
        await self.call(rpc, getattr(pb, req_name)(**{fld: target}))
        back = str(form.get("back") or "")
        return RedirectResponse(back if back.startswith("/") else f"/{kind}s/{target}", status_code=303)

    # -- login --------------------------------------------------------------------------------
    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.page(request, "login.html")
        form = await request.form()
        role = self.auth.role_of_token(str(form.get("token", "")))
        if role is None:
            return self.page(request, "login.html", 401, failed=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self.auth.session_for(role),
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response


def create_app(cfg: DashboardConfig) -> Starlette:
    """The dashboard as an ASGI app (serve it with uvicorn: `python -m taskdash`)."""
    dash = Dashboard(cfg)

    def guarded(view: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if dash.role(request) is None:
                return dash.page(request, "login.html", 401, required=True)
            try:
                return await view(request)
            except grpc.aio.AioRpcError as err:
                code = err.code()
                return dash.page(
                    request, "error.html", HTTP_STATUS.get(code, 502), message=f"{code.name}: {err.details()}"
                )

        return endpoint

    routes = [
        Route("/", guarded(dash.queues)),
        Route("/tasks", guarded(dash.tasks)),
        Route("/tasks/{task_id}", guarded(dash.task)),
        Route("/tasks/{task_id}/events", guarded(dash.events_json)),
        Route("/tasks/{task_id}/events/stream", guarded(dash.events_stream)),
        Route("/act/{action}/{target}", guarded(dash.act), methods=["POST"]),
        Route("/login", dash.login, methods=["GET", "POST"]),
        Route("/logout", dash.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, lifespan=dash.lifespan)


# -- formatting -------------------------------------------------------------------------------
def _when(ts: Timestamp) -> str:
    if ts.seconds == 0 and ts.nanos == 0:
        return ""
    return ts.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _age(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h" if s < 172800 else f"{s // 86400}d"


def _status(value: int) -> str:
    return pb.TaskStatus.Name(value).removeprefix("TASK_STATUS_").lower()  # type: ignore[arg-type]


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _event_json(e: pb.TaskEvent) -> dict[str, Any]:
    return {"seq": e.seq, "kind": e.kind, "data": e.data, "at": _when(e.emitted_at)}


def _query(params: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(params)
