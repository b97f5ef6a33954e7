"""A running Dagster deployment, through its own GraphQL API (the one the UI uses): reload the code location
after the bridges file changed, turn a bridge's sensor on or off, end a bridge's runs."""

from __future__ import annotations

from urllib.parse import urlparse

import requests
from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

LOCATION = "bridge_assets"  # workspace.yaml's python_module
REPOSITORY = "__repository__"  # what Dagster names the one repository of a Definitions object
IN_FLIGHT = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED"]

_SENSOR = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { id status } }
    ... on PythonError { message }
    ... on SensorNotFoundError { message }
  }
}"""
_START = """
mutation Start($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { status } }
    ... on PythonError { message }
    ... on UnauthorizedError { message }
  }
}"""
_STOP = """
mutation Stop($id: String!) {
  stopSensor(id: $id) {
    __typename
    ... on StopSensorMutationResult { instigationState { status } }
    ... on PythonError { message }
    ... on UnauthorizedError { message }
  }
}"""
_RUNS = """
query Runs($filter: RunsFilter!) {
  runsOrError(filter: $filter) {
    __typename
    ... on Runs { results { runId status } }
    ... on PythonError { message }
  }
}"""


def _selector(sensor: str) -> dict:
    return {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": sensor}


class DeploymentError(RuntimeError):
    """The deployment did not do what was asked; the message says what it answered."""


class Deployment:
    def __init__(self, url: str):
        parsed = urlparse(url if "://" in url else f"http://{url}")
        self.url = url
        self._client = DagsterGraphQLClient(parsed.hostname or "127.0.0.1", port_number=parsed.port,
                                            use_https=parsed.scheme == "https", timeout=30)

    def reachable(self) -> bool:
        try:
            requests.get(f"{self.url.rstrip('/')}/server_info", timeout=3).raise_for_status()
            return True
        except requests.RequestException:
            return False

    def _ask(self, query: str, variables: dict) -> dict:
        try:
            return self._client._execute(query, variables)  # the client's public methods cover runs only
        except DagsterGraphQLClientError as exc:
            raise DeploymentError(f"Dagster at {self.url}: {exc}") from None

    def reload(self) -> None:
        """Load the code location again, so it sees the bridges file as it is now."""
        result = self._client.reload_repository_location(LOCATION)
        if result.status.value != "SUCCESS":
            raise DeploymentError(f"Dagster at {self.url} could not reload {LOCATION}: {result.message}")

    def _sensor_state(self, selector: dict) -> dict:
        found = self._ask(_SENSOR, {"selector": selector})["sensorOrError"]
        if found["__typename"] != "Sensor":
            raise DeploymentError(f"Dagster at {self.url}: sensor {selector['sensorName']}: "
                                  f"{found.get('message', found['__typename'])}")
        return found["sensorState"]

    def sensor_status(self, sensor: str) -> str:
        """RUNNING or STOPPED."""
        return self._sensor_state(_selector(sensor))["status"]

    def set_sensor(self, sensor: str, running: bool) -> str:
        """Turn the sensor on or off; its status afterwards."""
        selector = _selector(sensor)
        state = self._sensor_state(selector)
        if running:
            done = self._ask(_START, {"selector": selector})["startSensor"]
            if done["__typename"] != "Sensor":
                raise DeploymentError(f"Dagster at {self.url}: starting {sensor}: {done.get('message')}")
            return done["sensorState"]["status"]
        done = self._ask(_STOP, {"id": state["id"]})["stopSensor"]
        if done["__typename"] != "StopSensorMutationResult":
            raise DeploymentError(f"Dagster at {self.url}: stopping {sensor}: {done.get('message')}")
        return done["instigationState"]["status"]

    def end_runs(self, bridge: str) -> list[str]:
        """Terminate the bridge's runs in flight (a continuous run ends after its batch and records its
        position); the run ids."""
        runs = self._ask(_RUNS, {"filter": {"tags": [{"key": "bridge", "value": bridge}],
                                            "statuses": IN_FLIGHT}})["runsOrError"]
        if runs["__typename"] != "Runs":
            raise DeploymentError(f"Dagster at {self.url}: {runs.get('message')}")
        ids = [run["runId"] for run in runs["results"]]
        for run_id in ids:
            self._client.terminate_run(run_id)
        return ids
