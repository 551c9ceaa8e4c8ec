"""``DeferrableSensor``: look once in the worker, then wait in the triggerer. The one way every sensor here waits.

A sensor whose answer is already there should not cost a trip through the triggerer, and one
whose answer is not should not hold a worker slot. So ``execute`` pokes once; if that is not
enough and the sensor is deferrable, it hands the waiting to the sensor's trigger, and
``execute_complete`` turns the trigger's one event into the result or a clear failure.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import conf
from airflow.sdk import BaseSensorOperator, PokeReturnValue

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger


class DeferrableSensor(BaseSensorOperator):
    """A sensor that pokes once, then defers to :meth:`trigger` until :meth:`finish` can answer.

    :param deferrable: wait in the triggerer between looks (default: Airflow's
        ``[operators] default_deferrable``).
    """

    def __init__(
        self, *, deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable

    def trigger(self) -> BaseTrigger:
        """The trigger that waits for what :meth:`poke` looks for."""
        raise NotImplementedError

    def finish(self, context: Context, event: dict[str, Any]) -> Any:
        """The result the trigger's event stands for, or the exception it means."""
        raise NotImplementedError

    def before_deferring(self, context: Context) -> PokeReturnValue | None:
        """A last chance to finish (or wait) in the worker before deferring; ``None`` to defer."""
        return None

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if isinstance(first, PokeReturnValue) and first.is_done:
            return first.xcom_value
        last = self.before_deferring(context)
        if last is not None and last.is_done:
            return last.xcom_value
        self.defer(trigger=self.trigger(), method_name="execute_complete", timeout=timedelta(seconds=self.timeout))

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Back from the triggerer with one event; with none (a task left deferred, run again by hand), look again."""
        if event is None:
            return self.execute(context)
        return self.finish(context, event)
