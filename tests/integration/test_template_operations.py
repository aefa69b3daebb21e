"""template.yaml's operations: alarms on every dead-letter queue and every function, the API's
5xx alarm, the alarm topic, and a dashboard that shows every function and queue.

These read the template (as tests/integration/test_template.py does) and fail when a queue or a
function is added without its alarm, or the dashboard falls behind the template.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.aws import Resolver, function_ids, load_template

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PARAMETERS: dict[str, Any] = TEMPLATE["Parameters"]
FUNCTIONS = function_ids(TEMPLATE)
QUEUES = [lid for lid, res in RESOURCES.items() if res["Type"] == "AWS::SQS::Queue"]
DEAD_LETTER_QUEUES = [lid for lid in QUEUES if lid.endswith("DeadLetterQueue")]
ALARMS = {
    lid: res["Properties"]
    for lid, res in RESOURCES.items()
    if res["Type"] == "AWS::CloudWatch::Alarm"
}
TOPIC = {"Ref": "AlarmTopic"}
PSEUDO = {"AWS::StackName", "AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix"}
SUB_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _metrics_of(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics an alarm watches: its single metric, or each MetricStat of its metric math,
    as {"Namespace", "MetricName", "Dimensions": {name: value}}."""
    if "MetricName" in alarm:
        return [
            {
                "Namespace": alarm["Namespace"],
                "MetricName": alarm["MetricName"],
                "Dimensions": {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])},
            }
        ]
    found = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            found.append(
                {
                    "Namespace": metric["Namespace"],
                    "MetricName": metric["MetricName"],
                    "Dimensions": {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])},
                }
            )
    return found


def _alarms_watching(namespace: str, metric_name: str, **dimensions: Any) -> list[str]:
    return [
        lid
        for lid, alarm in ALARMS.items()
        if any(
            m["Namespace"] == namespace
            and m["MetricName"] == metric_name
            and all(m["Dimensions"].get(k) == v for k, v in dimensions.items())
            for m in _metrics_of(alarm)
        )
    ]


def _dashboard_sub() -> tuple[str, dict[str, Any]]:
    """The dashboard body's !Sub: its JSON text and its variables (none in the short form)."""
    (dashboard,) = [
        res["Properties"]
        for res in RESOURCES.values()
        if res["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    body = dashboard["DashboardBody"]
    assert isinstance(body, dict) and "Fn::Sub" in body, "use !Sub for JSON"
    sub = body["Fn::Sub"]
    text, variables = (sub, {}) if isinstance(sub, str) else sub
    assert isinstance(text, str) and isinstance(variables, dict)
    return text, variables


def _dashboard_text(render_queue_arn: str = "") -> str:
    """The body's text with its variables resolved for the given RenderQueueArn parameter."""
    text, variables = _dashboard_sub()
    resolver = Resolver.for_template(TEMPLATE, parameters={"RenderQueueArn": render_queue_arn})
    for name, value in variables.items():
        text = text.replace(f"${{{name}}}", resolver.resolve(value))
    return text


def _substituted(text: str) -> str:
    """The body with every ${...} replaced by a marker; each must name something that exists."""

    def marker(match: re.Match[str]) -> str:
        name = match.group(1)
        target = name.split(".", 1)[0]
        assert name in PSEUDO or target in RESOURCES or target in PARAMETERS, name
        return f"<{name}>"

    return SUB_VARIABLE.sub(marker, text)


def test_every_dead_letter_queue_has_an_alarm_on_its_first_message() -> None:
    # one per stage queue, and the scheduler's
    assert len(DEAD_LETTER_QUEUES) == 6 and "SchedulerDeadLetterQueue" in DEAD_LETTER_QUEUES
    for queue in DEAD_LETTER_QUEUES:
        watching = _alarms_watching(
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            QueueName={"Fn::GetAtt": [queue, "QueueName"]},
        )
        assert watching, f"no alarm on {queue}"
        for lid in watching:
            alarm = ALARMS[lid]
            # One message is enough: > 0, or >= 1.
            assert (alarm["ComparisonOperator"], alarm["Threshold"]) in {
                ("GreaterThanThreshold", 0),
                ("GreaterThanOrEqualToThreshold", 1),
            }, lid
            assert alarm["Statistic"] == "Maximum", lid
            # SQS stops reporting a queue untouched for six hours, even a full one: missing
            # data must not end the alarm.
            assert alarm["TreatMissingData"] == "ignore", lid


def test_every_function_has_an_error_rate_alarm_and_a_throttle_alarm() -> None:
    assert FUNCTIONS
    for function in FUNCTIONS:
        ref = {"Ref": function}
        errors = _alarms_watching("AWS/Lambda", "Errors", FunctionName=ref)
        assert errors, f"no error alarm on {function}"
        for lid in errors:
            # A rate: the same alarm divides by the function's invocations.
            assert lid in _alarms_watching("AWS/Lambda", "Invocations", FunctionName=ref), lid
            (expression,) = [q for q in ALARMS[lid]["Metrics"] if q.get("ReturnData", True)]
            assert "/" in expression["Expression"], lid
            assert ALARMS[lid]["Threshold"] == {"Ref": "FunctionErrorRateAlarmPercent"}, lid
        assert _alarms_watching("AWS/Lambda", "Throttles", FunctionName=ref), function


def test_the_intake_api_has_a_5xx_rate_alarm() -> None:
    (api,) = [lid for lid, res in RESOURCES.items() if res["Type"] == "AWS::Serverless::Api"]
    api_props = RESOURCES[api]["Properties"]
    dimensions = {"ApiName": api_props["Name"], "Stage": api_props["StageName"]}
    (alarm,) = _alarms_watching("AWS/ApiGateway", "5XXError", **dimensions)
    assert alarm in _alarms_watching("AWS/ApiGateway", "Count", **dimensions)
    assert ALARMS[alarm]["Threshold"] == {"Ref": "ApiServerErrorRateAlarmPercent"}
    # X-Ray follows a request from the API into the function (functions: Globals, tested in
    # test_template.py).
    assert api_props["TracingEnabled"] is True


def test_every_alarm_notifies_the_alarm_topic() -> None:
    assert RESOURCES["AlarmTopic"]["Type"] == "AWS::SNS::Topic"
    for lid, alarm in ALARMS.items():
        assert alarm["AlarmActions"] == [TOPIC], lid
        assert alarm["OKActions"] == [TOPIC], lid
        assert alarm.get("AlarmDescription"), f"{lid}: say what to do"
        for query in alarm.get("Metrics", []):
            if "MetricStat" in query:
                assert query["ReturnData"] is False, lid


@pytest.mark.parametrize(("email", "subscribed"), [("", False), ("ops@example.org", True)])
def test_the_email_subscription_exists_only_when_an_address_is_given(
    email: str, subscribed: bool
) -> None:
    subscription = RESOURCES["AlarmEmailSubscription"]
    assert subscription["Type"] == "AWS::SNS::Subscription"
    assert subscription["Properties"]["TopicArn"] == TOPIC
    assert subscription["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}
    assert PARAMETERS["AlarmEmail"]["Default"] == ""
    pattern = PARAMETERS["AlarmEmail"]["AllowedPattern"]
    assert re.fullmatch(pattern, email)
    resolver = Resolver.for_template(TEMPLATE, parameters={"AlarmEmail": email})
    assert resolver.condition(subscription["Condition"]) is subscribed


def test_the_dashboard_is_json_and_shows_every_function_queue_and_alarm() -> None:
    text = _dashboard_text()
    body = json.loads(_substituted(text))
    widgets = body["widgets"]
    assert widgets
    for function in FUNCTIONS:
        assert f"${{{function}}}" in text, f"dashboard misses {function}"
    for queue in QUEUES:
        assert f"${{{queue}.QueueName}}" in text, f"dashboard misses {queue}"
    shown_alarms = {
        alarm
        for widget in widgets
        if widget["type"] == "alarm"
        for alarm in widget["properties"]["alarms"]
    }
    assert shown_alarms == {f"<{lid}.Arn>" for lid in ALARMS}
    for widget in widgets:
        assert {"x", "y", "width", "height"} <= set(widget), widget
        assert widget["x"] + widget["width"] <= 24, widget
        if widget["type"] == "metric":
            assert widget["properties"]["region"] == "<AWS::Region>"


def test_the_dashboard_reads_the_harvester_metrics_where_the_functions_write_them() -> None:
    namespace = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"][
        "POWERTOOLS_METRICS_NAMESPACE"
    ]
    body = json.loads(_substituted(_dashboard_text()))
    searches = [
        query["expression"]
        for widget in body["widgets"]
        if widget["type"] == "metric"
        for query in widget["properties"]["metrics"]
        if isinstance(query, dict) and "expression" in query
    ]
    # Outcomes by kind: the dimensions aws_runtime gives them (service, Stage, Outcome).
    assert (
        f"SEARCH('{{{namespace},Outcome,Stage,service}} MetricName=\"Outcomes\"', 'Sum', 300)"
        in searches
    )
    for name in ("JobsProcessed", "JobsFailed"):
        assert (
            f"SEARCH('{{{namespace},Stage,service}} MetricName=\"{name}\"', 'Sum', 300)" in searches
        )


def test_every_work_queue_has_an_alarm_on_the_age_of_its_oldest_message() -> None:
    work_queues = [q for q in QUEUES if q not in DEAD_LETTER_QUEUES]
    assert len(work_queues) == 5
    for queue in work_queues:
        watching = _alarms_watching(
            "AWS/SQS",
            "ApproximateAgeOfOldestMessage",
            QueueName={"Fn::GetAtt": [queue, "QueueName"]},
        )
        assert len(watching) == 1, f"no age alarm on {queue}"
        alarm = ALARMS[watching[0]]
        assert alarm["Statistic"] == "Maximum" and alarm["ComparisonOperator"] in {
            "GreaterThanThreshold",
            "GreaterThanOrEqualToThreshold",
        }
        assert alarm["TreatMissingData"] == "ignore", queue
        # The threshold is a parameter whose every allowed value fires before the message
        # expires (the queue's retention)
        parameter = PARAMETERS[alarm["Threshold"]["Ref"]]
        retention = RESOURCES[queue]["Properties"]["MessageRetentionPeriod"]
        assert parameter["Type"] == "Number"
        assert parameter["MinValue"] <= parameter["Default"] < parameter["MaxValue"] < retention
        waited = alarm["Period"] * alarm.get("DatapointsToAlarm", alarm["EvaluationPeriods"])
        assert parameter["MaxValue"] + waited <= retention, queue


@pytest.mark.parametrize(
    "render_queue_arn",
    ["", "arn:aws:sqs:eu-west-1:123456789012:cdif-render-RenderQueue-1A2B3C"],
)
def test_the_dashboard_shows_the_render_queue_only_when_the_renderer_is_deployed(
    render_queue_arn: str,
) -> None:
    resolver = Resolver.for_template(TEMPLATE, parameters={"RenderQueueArn": render_queue_arn})
    deployed = resolver.condition("RendererDeployed")
    assert deployed is bool(render_queue_arn)
    body = json.loads(_substituted(_dashboard_text(render_queue_arn)))
    queue_name = render_queue_arn.rsplit(":", 1)[-1]
    render_widgets = [
        widget
        for widget in body["widgets"]
        if widget["type"] == "metric"
        and any(
            isinstance(metric, list)
            and metric[0] == "AWS/SQS"
            and metric[2:4] == ["QueueName", queue_name]
            for metric in widget["properties"]["metrics"]
        )
    ]
    shown = {metric[1] for widget in render_widgets for metric in widget["properties"]["metrics"]}
    expected = {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"}
    assert shown == (expected if deployed else set())
    # Below every other widget, inside the grid.
    others = [widget for widget in body["widgets"] if widget not in render_widgets]
    bottom = max(widget["y"] + widget["height"] for widget in others)
    for widget in render_widgets:
        assert widget["y"] >= bottom and widget["x"] + widget["width"] <= 24, widget
