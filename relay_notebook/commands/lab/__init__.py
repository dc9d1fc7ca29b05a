"""The recovery lab: the canonical crash-and-recover scenarios, runnable from a notebook."""

from relay_notebook.commands.lab.scenarios import LAB_RELAY, SCENARIOS, Lab, Scenario
from relay_notebook.commands.lab.service import OrderBook, OrderService, order_service

__all__ = [
    "LAB_RELAY",
    "SCENARIOS",
    "Lab",
    "OrderBook",
    "OrderService",
    "Scenario",
    "order_service",
]
