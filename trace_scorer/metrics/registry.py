"""Find metrics by name: the built-ins in this package plus third-party entry points.

Built-ins are discovered by importing every module of ``trace_scorer.metrics`` and collecting the
concrete :class:`Metric` subclasses with a ``key``, so adding a metric is adding one file. Third-party
packages register theirs under the entry-point group ``trace_scorer.metrics``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

import trace_scorer.metrics as builtin_package
from trace_scorer.errors import UserError
from trace_scorer.metrics.base import Metric

ENTRY_POINT_GROUP = "trace_scorer.metrics"

MetricClass = type[Metric[Any]]


class RegistryError(UserError):
    """A metric could not be registered (two with one key, a broken entry point)."""

    heading = "configuration error:\n"


def _builtin_classes() -> Iterator[MetricClass]:
    for module_info in pkgutil.iter_modules(builtin_package.__path__):
        module = importlib.import_module(f"{builtin_package.__name__}.{module_info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, Metric)
                and obj.__module__ == module.__name__
                and not inspect.isabstract(obj)
                and "key" in vars(obj)
            ):
                yield obj


def _entry_point_classes() -> Iterator[MetricClass]:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:
            raise RegistryError(f"entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if not (inspect.isclass(obj) and issubclass(obj, Metric) and "key" in vars(obj)):
            raise RegistryError(f"entry point {ep.name!r} ({ep.value}) is not a Metric class with a key")
        yield obj


class MetricRegistry:
    """Metric classes by key."""

    def __init__(self, classes: list[MetricClass]) -> None:
        self._by_key: dict[str, MetricClass] = {}
        for cls in classes:
            if cls.key in self._by_key and self._by_key[cls.key] is not cls:
                other = self._by_key[cls.key]
                raise RegistryError(
                    f"metric key {cls.key!r} is defined twice: {other.__module__}.{other.__name__} "
                    f"and {cls.__module__}.{cls.__name__}"
                )
            self._by_key[cls.key] = cls

    def get(self, key: str) -> MetricClass | None:
        return self._by_key.get(key)

    def keys(self) -> list[str]:
        return sorted(self._by_key)

    def classes(self) -> list[MetricClass]:
        return [self._by_key[k] for k in self.keys()]

    def with_classes(self, *classes: MetricClass) -> MetricRegistry:
        """A copy with more classes (tests and embedding applications register their own this way)."""
        return MetricRegistry([*self._by_key.values(), *classes])


@lru_cache(maxsize=1)
def default_registry() -> MetricRegistry:
    """Built-ins plus installed entry points (loaded once per process)."""
    return MetricRegistry([*_builtin_classes(), *_entry_point_classes()])
