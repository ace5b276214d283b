"""The upstream simulator: live streams over a real WebSocket server, and the records that
judge "exactly one subscriber" and "no message lost". See server.py, routes.py, control.py."""

from entrypoints.simulator.server import CLOSE_GONE, UpstreamSimulator
from entrypoints.simulator.streams import StreamLimitReached, is_message

__all__ = ["CLOSE_GONE", "StreamLimitReached", "UpstreamSimulator", "is_message"]
