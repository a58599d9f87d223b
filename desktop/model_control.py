"""The Models page's work (part of the composition root): the catalog scanned off the UI thread
with each model's fit from the readiness check, Load through the same path as Settings → Model
(after the check that refuses a model that cannot load, the loaded one untouched), Unload, unload
after N idle minutes, and downloads from the Hub (their events hop onto the app's loop)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine

from desktop.errors import OmnideskError
from desktop.models.catalog import Catalog
from desktop.models.checks import problem
from desktop.models.download import Downloads, Job
from desktop.models.fit import fit
from desktop.models.hub import Choice, choices, parse
from desktop.models.idle import IdleClock
from desktop.models.places import Places
from desktop.settings import Settings
from desktop.workers.readiness import Choices

log = logging.getLogger(__name__)
IDLE_TICK_S = 15.0


def default_models_folder() -> Path:
    """<the user data folder>/models (OMNIDESK_DATA_DIR overrides the data folder, as for conversations)."""
    from desktop.chat.conversations import data_dir

    return data_dir() / "models"


class ModelControl:
    """Collaborators: `settings()`; `apply(new settings)` (Composition.apply_settings: reloads);
    `unload()` and `boot()` (the engine); `loaded()` (the model's name, None while none is up);
    `activity()` ((a request runs or waits, requests submitted so far)); `readiness()` (this machine's choices, None: unknown);
    `say(text)` (the status bar); `spawn` (background tasks); `save()` (the settings);
    `wait_ready()` (the load under way ended: True when a model is up) and `failure()` (why not); `downloads` and `catalog` (built
    by `create`, or passed in by tests)."""

    def __init__(self, settings: Callable[[], Settings], *, apply: Callable[[Settings], Awaitable[Any]],
                 unload: Callable[[], Awaitable[None]], boot: Callable[[], Any], loaded: Callable[[], str | None],
                 activity: Callable[[], tuple[bool, int]], readiness: Callable[[], Choices | None],
                 say: Callable[[str], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task], save: Callable[[], None],
                 wait_ready: Callable[[], Awaitable[bool]], failure: Callable[[], str],
                 catalog: Catalog, downloads: Downloads) -> None:
        self._settings, self._apply, self._unload, self._boot = settings, apply, unload, boot
        self._loaded, self._activity, self._readiness, self._say, self._spawn = loaded, activity, readiness, say, spawn
        self.catalog, self.downloads, self._save = catalog, downloads, save
        self._wait_ready, self._failure = wait_ready, failure
        self.page: Any = None  # desktop.ui.models_page.ModelsPage, once attached
        self.unloaded = False  # the user (or the idle timer) unloaded the model
        self.idle = IdleClock(time.monotonic())
        self._choices: list[Choice] = []
        self._request: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def create(cls, settings: Callable[[], Settings], state_dir: Path, embedded: Callable[[], Path | None],
               **parts: Any) -> ModelControl:
        def folder() -> Path:
            chosen = settings().models_folder
            return Path(chosen).expanduser() if chosen else default_models_folder()

        catalog = Catalog(lambda: Places.default(str(folder())), embedded)
        downloads = Downloads(state_dir, folder, lambda: settings().hub_downloads)
        return cls(settings, catalog=catalog, downloads=downloads, **parts)

    def folder(self) -> str:
        return self._settings().models_folder or str(default_models_folder())

    # ------------------------------------------------------------------ the page

    def attach(self, page: Any) -> None:
        """Wire the page's requests (the first scan: when the page is first shown)."""
        self.page, self._loop = page, asyncio.get_event_loop()
        page.load_requested.connect(lambda source: self._spawn(self.load(source)))
        page.unload_requested.connect(lambda: self._spawn(self.unload()))
        page.refresh_requested.connect(lambda: self._spawn(self.refresh()))
        page.folder_chosen.connect(self._folder_chosen)
        page.idle_minutes_changed.connect(self._idle_changed)
        page.downloads.allow_changed.connect(self._allow_changed)
        page.downloads.find_requested.connect(lambda text: self._spawn(self.find(text)))
        page.downloads.download_requested.connect(self.download)
        page.downloads.resume_requested.connect(lambda job_id: self._guard(lambda: self.downloads.resume(job_id)))
        page.downloads.cancel_requested.connect(self.downloads.cancel)
        self.downloads.listeners.append(self._job_changed)
        for job in list(self.downloads.jobs.values()):
            page.show_job(job)
        if page.isVisible():
            self._spawn(self.refresh())

    def engine_state(self, state: str) -> None:
        """The engine's state (Composition.engine_state) → the page's "loaded" line."""
        if state in ("loading", "restarting"):
            self.idle.touch(time.monotonic())
        if self.page is None:
            return
        source = self._settings().model_source
        if state == "ready":
            self.unloaded = False
            self.page.set_loaded(source, self._loaded())
        elif state in ("loading", "restarting"):
            self.page.set_loaded(source, None, "Loading…")
        else:
            self.page.set_loaded(None, None)

    # ------------------------------------------------------------------ work

    async def refresh(self) -> None:
        rows = await asyncio.to_thread(self.catalog.scan)
        choices_ = await asyncio.to_thread(self._readiness)  # stored after the first start's check
        fits = {r.source: fit(r, choices_) for r in rows if choices_ is not None and not r.problem}
        if self.page is not None:
            self.page.show_models(rows, fits)

    async def load(self, source: str) -> bool:
        """Check `source`, then load it through the settings (as Settings → Model does). A model
        that cannot load is refused with a sentence; the loaded one is untouched. One that passes
        the check but fails in the worker gives way to the model loaded before, with its reason."""
        why = await asyncio.to_thread(problem, source)
        if why:
            self._say(why)
            return False
        settings = self._settings()
        self._say(f"Loading {Path(source).name if source != 'default' else 'the embedded model'}…")
        if source == settings.model_source:
            if self.unloaded or self._loaded() is None:
                self.unloaded = False
                self._boot()
            return True
        before = settings.model_source
        await self._apply(settings.model_copy(update={"model_source": source}))
        if await self._wait_ready():
            return True
        why = self._failure() or "it did not start"
        await self._apply(self._settings().model_copy(update={"model_source": before}))
        self._say(f"{Path(source).name} could not be loaded ({why}); the model loaded before is back.")
        return False

    async def unload(self, why: str = "The model was unloaded; its memory is free. Load brings it back.") -> None:
        if self._loaded() is None and self.unloaded:
            return
        self.unloaded = True
        await self._unload()
        self._say(why)

    async def idle_loop(self) -> None:
        """Unload the model after the setting's idle minutes (checked every IDLE_TICK_S)."""
        while True:
            await asyncio.sleep(IDLE_TICK_S)
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        minutes = self._settings().idle_unload_minutes
        busy, submitted = self._activity()
        self.idle.observe(now, busy, submitted)
        if self._loaded() is None:
            self.idle.touch(now)
        elif self.idle.due(now, minutes):
            self.idle.touch(now)
            self._spawn(self.unload(f"The model was unloaded after {minutes} idle minutes; Load (Ctrl+5) brings it back."))

    async def find(self, text: str) -> None:
        try:
            request = parse(text)
            files = await asyncio.to_thread(self.downloads.list_files, request)
        except (ValueError, OmnideskError) as exc:
            self._tell_box(getattr(exc, "message", str(exc)))
            self.page.show_choices([])
            return
        self._request, self._choices = request, choices(files, request.filename)
        self.page.show_choices(self._choices)
        self._tell_box(f"{len(self._choices)} choice(s) in {request.repo_id}." if self._choices else
                       f"{request.repo_id} has no model files Omnidesk can use.")

    def download(self, index: int) -> None:
        if not 0 <= index < len(self._choices):
            return
        self._guard(lambda: self.downloads.start(self._request, list(self._choices[index].files)))

    # ------------------------------------------------------------------ helpers

    def _guard(self, work: Callable[[], Job]) -> None:
        try:
            job = work()
        except OmnideskError as exc:
            self._tell_box(exc.message)
            return
        self.page.show_job(job)

    def _job_changed(self, job: Job) -> None:  # from a download's reader thread
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._show_job, job)

    def _show_job(self, job: Job) -> None:
        if self.page is not None:
            self.page.show_job(job)
        if job.state.value == "done":
            self._say(f"Downloaded {job.title}.")
            self._spawn(self.refresh())

    def _tell_box(self, text: str) -> None:
        if self.page is not None:
            self.page.downloads.say(text)

    def _folder_chosen(self, folder: str) -> None:
        self._settings().models_folder = folder
        self._save()
        self._spawn(self.refresh())

    def _idle_changed(self, minutes: int) -> None:
        self._settings().idle_unload_minutes = minutes
        self._save()
        self.idle.touch(time.monotonic())

    def _allow_changed(self, on: bool) -> None:
        self._settings().hub_downloads = on
        self._save()
        if not on:  # no network from now on: running downloads pause
            self.downloads.close("Paused: downloads from the Hub are no longer allowed.")
