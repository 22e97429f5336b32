"""The demo agent's tools: an order lookup and a parcel tracker over fixed data.

Plain synchronous functions, as a real tool calling a database or an HTTP
API would be; the runtime runs them in a worker thread.
"""

from __future__ import annotations

from typing import Annotated, Any

ORDERS: dict[str, dict[str, Any]] = {
    "1042": {
        "item": "Espresso machine",
        "status": "shipped",
        "carrier": "ParcelPost",
        "tracking_number": "PP-77310",
    },
    "1043": {"item": "Burr grinder", "status": "processing", "carrier": None},
    "1044": {
        "item": "Milk frother",
        "status": "delivered",
        "carrier": "QuickShip",
        "tracking_number": "QS-50221",
    },
    "1045": {"item": "Descaling kit", "status": "cancelled", "carrier": None},
}

SHIPMENTS: dict[str, dict[str, str]] = {
    "PP-77310": {"location": "Leipzig distribution centre", "eta": "Thursday"},
    "QS-50221": {"location": "Delivered to the front desk", "eta": "delivered"},
}


class UnknownOrderError(LookupError):
    pass


def lookup_order(order_id: Annotated[str, "The order number, e.g. 1042"]) -> dict[str, Any]:
    """Look up an order's item, status and carrier by its order number."""
    number = order_id.strip().lstrip("#")
    if number not in ORDERS:
        raise UnknownOrderError(f"there is no order {number}")
    return {"order_id": number, **ORDERS[number]}


def track_shipment(
    tracking_number: Annotated[str, "The carrier's tracking number"],
) -> dict[str, str]:
    """Where a parcel is now and when it should arrive."""
    if tracking_number not in SHIPMENTS:
        raise LookupError(f"the carrier does not know {tracking_number}")
    return {"tracking_number": tracking_number, **SHIPMENTS[tracking_number]}
