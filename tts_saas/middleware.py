"""Bases for middleware, sync and async capable: one that only looks at (request, response) on the
way out, one that may refuse a request before anything else sees it."""

from __future__ import annotations

import time

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class SyncAndAsyncMiddleware:
    """Runs in whichever mode the chain below it has: `self._async` says which."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)  # type: ignore[type-var]  # marks the instance, as Django documents


class ResponseMiddleware(SyncAndAsyncMiddleware):
    def __call__(self, request):
        if self._async:
            return self.__acall__(request)
        started = time.perf_counter()
        return self.process(request, self.get_response(request), started)

    async def __acall__(self, request):
        started = time.perf_counter()
        return self.process(request, await self.get_response(request), started)

    def process(self, request, response, started: float):
        raise NotImplementedError


class RequestCheckMiddleware(SyncAndAsyncMiddleware):
    """Answers `refuse(request)` instead of the view when it returns a response."""

    def __call__(self, request):
        if self._async:
            return self.__acall__(request)
        return self.refuse(request) or self.get_response(request)

    async def __acall__(self, request):
        return self.refuse(request) or await self.get_response(request)

    def refuse(self, request):
        raise NotImplementedError
