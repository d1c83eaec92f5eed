"""Machine Vision results (OPC 40100-1) from BeltSight crossings: a crossing as a `ResultDataType` (what the
result methods return) and as a `ResultReadyEventType`'s identifiers (`result_ids`), its `ResultContent`
(`result_content`: compact JSON), and `GetResultListFiltered`'s criteria (`ResultFilter`). The field
mapping is documented in docs/integrations/machine-vision.md.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from asyncua import ua

from daemon.bridge.state import Crossing, parse_eta

MV: Any = ua
"""`asyncua.ua` with the nodeset's data types, which asyncua registers there at import time."""

RESULT_COMPLETED = 1
"""ResultStateDataType 1: Completed (a crossing is a finished result)."""
RECIPE_ID = "beltsight"
CONFIGURATION_ID = "lines"
MAX_RESULTS = 100


def creation_time(at_ms: int) -> datetime:
    return datetime.fromtimestamp(at_ms / 1000, UTC)


def result_content(crossing: Crossing) -> str:
    """The one element of ResultContent: the crossing as compact JSON (label, cls, line, direction,
    count, eta per gate, and snapshot when the entry has one)."""
    content: dict[str, Any] = {
        "label": crossing.label,
        "cls": crossing.cls,
        "line": crossing.line,
        "direction": crossing.direction,
        "count": crossing.count,
        "eta": parse_eta(crossing.eta_json),
    }
    if crossing.snapshot:
        content["snapshot"] = crossing.snapshot
    return json.dumps(content, separators=(",", ":"), sort_keys=True)


def result_ids(crossing: Crossing) -> dict[str, Any]:
    """The identifiers shared by the event and ResultDataType."""
    return {
        "ResultId": MV.ResultIdDataType(Id=crossing.entry_id),
        "PartId": MV.PartIdDataType(Id=str(crossing.track), Description=ua.LocalizedText(crossing.label)),
        "JobId": MV.JobIdDataType(Id=crossing.camera),
        "InternalRecipeId": MV.RecipeIdInternalDataType(Id=RECIPE_ID),
        "InternalConfigurationId": MV.ConfigurationIdDataType(Id=CONFIGURATION_ID),
    }


def result_data(crossing: Crossing) -> Any:
    """The crossing as a `ResultDataType` (what the result methods return)."""
    return MV.ResultDataType(
        IsPartial=False,
        ResultState=RESULT_COMPLETED,
        CreationTime=creation_time(crossing.at_ms),
        ResultContent=[ua.Variant(result_content(crossing), ua.VariantType.String)],
        **result_ids(crossing),
    )


def filter_id(value: Any) -> str:
    """A filter argument's Id ("" when the client left it empty or null: no filter)."""
    return str(getattr(value, "Id", "") or "") if value is not None else ""


class ResultFilter:
    """GetResultListFiltered's criteria; empty ones match everything."""

    def __init__(self, args: list[Any]) -> None:
        values = [a.Value if isinstance(a, ua.Variant) else a for a in args]
        values += [None] * (12 - len(values))
        self.state = int(values[0] or 0)
        self.part = filter_id(values[2])
        self.fixed = {  # criteria whose value is the same for every BeltSight result
            "MeasId": (filter_id(values[1]), ""),
            "ExternalRecipeId": (filter_id(values[3]), ""),
            "InternalRecipeId": (filter_id(values[4]), RECIPE_ID),
            "ExternalConfigurationId": (filter_id(values[5]), ""),
            "InternalConfigurationId": (filter_id(values[6]), CONFIGURATION_ID),
            "ProductId": (filter_id(values[7]), ""),
        }
        self.job = filter_id(values[8])
        asked = int(values[9] or 0)
        self.max_results = min(asked, MAX_RESULTS) if asked > 0 else MAX_RESULTS
        self.start_index = int(values[10] or 0)

    def matches(self, crossing: Crossing) -> bool:
        if self.state not in (0, RESULT_COMPLETED):
            return False
        if self.part and self.part != str(crossing.track):
            return False
        if self.job and self.job != crossing.camera:
            return False
        return all(not given or given == ours for given, ours in self.fixed.values())
