"""Find metrics by name: the built-ins in this package plus third-party entry points.

Built-ins are the concrete :class:`Metric` subclasses with a ``key`` in the modules of
``trace_scorer.metrics``, so adding a metric is adding one file. They are imported when first asked for:
``get(key)`` imports the module named after the key (the convention every built-in follows, checked by
``tests/unit/core/test_registry_lazy.py``), so a target that uses tool_call_accuracy never imports nltk
for rouge; ``keys()``, ``classes()`` and a key no module is named after import them all. Third-party
packages register theirs under the entry-point group ``trace_scorer.metrics`` (loaded at once).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import trace_scorer.metrics as builtin_package
from trace_scorer.metrics.base import Metric
from trace_scorer.runtime.plugins import METRICS_GROUP, PluginError, load_plugins

ENTRY_POINT_GROUP = METRICS_GROUP

MetricClass = type[Metric[Any]]


class RegistryError(PluginError):
    """A metric could not be registered (two with one key, a broken entry point)."""


def _keyed_classes(module_name: str) -> Iterator[MetricClass]:
    """The concrete Metric subclasses with a key that the module defines."""
    module = importlib.import_module(module_name)
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if (
            issubclass(obj, Metric)
            and obj.__module__ == module.__name__
            and not inspect.isabstract(obj)
            and "key" in vars(obj)
        ):
            yield obj


def _is_builtin(cls: MetricClass) -> bool:
    return cls.__module__.startswith(f"{builtin_package.__name__}.")


def _builtin_modules() -> dict[str, str]:
    """The built-in metric modules not imported yet, by name (a metric's key is its module's name)."""
    return {
        info.name: f"{builtin_package.__name__}.{info.name}" for info in pkgutil.iter_modules(builtin_package.__path__)
    }


def _is_metric_class(obj: Any) -> bool:
    return inspect.isclass(obj) and issubclass(obj, Metric) and "key" in vars(obj)


def _entry_point_classes() -> Iterator[MetricClass]:
    yield from load_plugins(ENTRY_POINT_GROUP, _is_metric_class, "a Metric class with a key")


class MetricRegistry:
    """Metric classes by key; ``modules`` (name → module) are imported when first needed."""

    def __init__(self, classes: list[MetricClass], *, modules: dict[str, str] | None = None) -> None:
        self._by_key: dict[str, MetricClass] = {}
        self._modules = dict(modules or {})
        for cls in classes:
            self._add(cls)

    def _add(self, cls: MetricClass) -> None:
        if cls.key in self._by_key and self._by_key[cls.key] is not cls:
            # the built-in named first, whichever was imported first
            first, second = sorted((self._by_key[cls.key], cls), key=lambda c: not _is_builtin(c))
            raise RegistryError(
                f"metric key {cls.key!r} is defined twice: {first.__module__}.{first.__name__} "
                f"and {second.__module__}.{second.__name__}"
            )
        self._by_key[cls.key] = cls

    def _import(self, name: str) -> None:
        module = self._modules.pop(name, None)
        if module is not None:
            for cls in _keyed_classes(module):
                self._add(cls)

    def _import_all(self) -> None:
        for name in list(self._modules):
            self._import(name)

    def get(self, key: str) -> MetricClass | None:
        self._import(key)  # even if a third-party class has the key: two with one key is an error
        if key not in self._by_key:
            self._import_all()  # a key no module is named after (or no metric at all)
        return self._by_key.get(key)

    def keys(self) -> list[str]:
        self._import_all()
        return sorted(self._by_key)

    def classes(self) -> list[MetricClass]:
        return [self._by_key[k] for k in self.keys()]

    def with_classes(self, *classes: MetricClass) -> MetricRegistry:
        """A copy with more classes (tests and embedding applications register their own this way; the
        command line registers plug-ins by entry point)."""
        return MetricRegistry([*self._by_key.values(), *classes], modules=self._modules)


@lru_cache(maxsize=1)
def default_registry() -> MetricRegistry:
    """Built-ins (imported when asked for) plus installed entry points (loaded once per process)."""
    return MetricRegistry(list(_entry_point_classes()), modules=_builtin_modules())
