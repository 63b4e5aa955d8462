"""Module attributes ``serve --agent`` is pointed at in tests/cli/test_serve_frameworks.py.

``agent`` is a bare ADK ``LlmAgent`` (served with the integration's defaults);
``trips`` is an ``adk_producer(...)`` built with options (served as it is).
Both over tests/integrations/test_adk.py's scripted model: offline.
"""

from __future__ import annotations

import warnings

from google.adk.sessions import InMemorySessionService

from agui_pipes.integrations.adk import adk_producer
from tests.integrations.test_adk import _agent

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # ADK's "[EXPERIMENTAL]" notices
    agent = _agent()
    trips = adk_producer(_agent(), app_name="trips", session_service=InMemorySessionService())
