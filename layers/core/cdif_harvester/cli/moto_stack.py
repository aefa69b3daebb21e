"""The stack of template.yaml, provisioned in moto from the template itself.

``cdif-harvest invoke`` and the integration tests run the handlers against the queues, buckets and
tables of ``template.yaml`` without restating them: :func:`provision` reads the template (short
tags such as ``!Ref`` and ``!Sub`` included), resolves its intrinsic functions with the
parameters' defaults, and creates every ``AWS::SQS::Queue``, ``AWS::SQS::QueuePolicy``,
``AWS::S3::Bucket``, ``AWS::S3::BucketPolicy`` and ``AWS::DynamoDB::Table`` in an active moto
``mock_aws`` context, in dependency order. A property it cannot reproduce raises
:class:`UnsupportedTemplate`. Bucket policy ``Deny`` statements whose condition moto misreads are
left out and listed in :attr:`ProvisionedStack.moto_omissions`. Right after provisioning, the
queue fed by the bucket notification holds S3's ``s3:TestEvent`` message, as on AWS.

Functions are not created: :class:`ProvisionedStack` tells, per function, its environment as
Lambda sets it, its timeout, its code directory and the SQS queue that feeds it. Needs boto3
(the ``aws`` extra), moto and PyYAML (the ``dev`` extra); only the invoker imports it. See
docs/decisions/0073-handlers-without-docker-and-the-aws-extra.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path
from types import MappingProxyType
from typing import Any

import boto3
import yaml

__all__ = [
    "ACCOUNT_ID",
    "CATALOG_TABLE_ID",
    "PROVISIONED_TYPES",
    "RECORDS_BUCKET_ID",
    "REGION",
    "STACK_NAME",
    "TEMPLATE_PATH",
    "ProvisionedStack",
    "Resolver",
    "SqsEventSource",
    "UnsupportedTemplate",
    "function_ids",
    "load_template",
    "mocked_stack",
    "provision",
    "sqs_event",
]

#: The template of a checkout, read from the directory the command runs in.
TEMPLATE_PATH = Path("template.yaml")
STACK_NAME = "cdif-test"
ACCOUNT_ID = "123456789012"  # moto's default account
REGION = "us-east-1"
RECORDS_BUCKET_ID = "RecordsBucket"
CATALOG_TABLE_ID = "CatalogTable"
FUNCTION_TYPE = "AWS::Serverless::Function"
PROVISIONED_TYPES = frozenset(
    {
        "AWS::SQS::Queue",
        "AWS::SQS::QueuePolicy",
        "AWS::S3::Bucket",
        "AWS::S3::BucketPolicy",
        "AWS::DynamoDB::Table",
    }
)

Template = dict[str, Any]


class UnsupportedTemplate(NotImplementedError):
    """The template uses an intrinsic function or a property this module cannot reproduce."""


# --------------------------------------------------------------------------- loading


class TemplateLoader(yaml.SafeLoader):
    """A safe YAML loader that turns CloudFormation short tags into their long JSON form."""


def _construct_short_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:  # pragma: no cover - yaml has no other node kinds
        raise UnsupportedTemplate(f"unexpected node for !{suffix}")
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


TemplateLoader.add_multi_constructor("!", _construct_short_tag)


def load_template(path: Path = TEMPLATE_PATH) -> Template:
    """Return the template at ``path`` as plain data, short tags in their long form."""
    loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=TemplateLoader)  # noqa: S506
    if not isinstance(loaded, dict):
        raise UnsupportedTemplate(f"{path} is not a mapping")
    return loaded


def function_ids(template: Template) -> list[str]:
    """Logical ids of every ``AWS::Serverless::Function`` in ``template``."""
    return [lid for lid, res in template["Resources"].items() if res["Type"] == FUNCTION_TYPE]


# --------------------------------------------------------------------------- resolving


class _NoValue:
    """``AWS::NoValue``: the property it stands for is left out."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()
_SUB_VARIABLE = re.compile(r"\$\{([^}]+)\}")


@dataclass
class Resolver:
    """Resolves intrinsic functions against parameters, pseudo parameters and made resources."""

    template: Template
    parameters: dict[str, Any]
    pseudo: dict[str, Any]
    refs: dict[str, str] = field(default_factory=dict)
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def for_template(
        cls,
        template: Template,
        *,
        stack_name: str = STACK_NAME,
        account_id: str = ACCOUNT_ID,
        region: str = REGION,
        parameters: Mapping[str, str] | None = None,
    ) -> Resolver:
        """A resolver with every parameter at its default unless given in ``parameters``."""
        given = dict(parameters or {})
        values: dict[str, Any] = {}
        for name, spec in template.get("Parameters", {}).items():
            if name in given:
                raw: Any = given.pop(name)
            elif "Default" in spec:
                raw = spec["Default"]
            else:
                raise UnsupportedTemplate(f"parameter {name} has no default and was not given")
            text = _scalar_text(raw)
            if spec["Type"] == "CommaDelimitedList" or spec["Type"].startswith("List<"):
                values[name] = text.split(",") if text else []
            else:
                values[name] = text
        if given:
            raise UnsupportedTemplate(f"unknown parameters: {sorted(given)}")
        pseudo: dict[str, Any] = {
            "AWS::StackName": stack_name,
            "AWS::AccountId": account_id,
            "AWS::Region": region,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackId": (
                f"arn:aws:cloudformation:{region}:{account_id}:stack/{stack_name}/"
                "00000000-0000-0000-0000-000000000000"
            ),
            "AWS::NotificationARNs": [],
        }
        return cls(template=template, parameters=values, pseudo=pseudo)

    def condition(self, name: str) -> bool:
        """Evaluate the template condition ``name``."""
        return bool(self._condition_value(self.template["Conditions"][name]))

    def _condition_value(self, value: Any) -> bool:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Equals":
                left, right = (self.resolve(item) for item in arg)
                return _scalar_text(left) == _scalar_text(right)
            if key == "Fn::Not":
                return not self._condition_value(arg[0])
            if key == "Fn::And":
                return all(self._condition_value(item) for item in arg)
            if key == "Fn::Or":
                return any(self._condition_value(item) for item in arg)
        raise UnsupportedTemplate(f"cannot evaluate condition {value!r}")

    def ref(self, name: str) -> Any:
        """The value of ``!Ref name``."""
        for table in (self.pseudo, self.parameters, self.refs):
            if name in table:
                return table[name]
        if name == "AWS::NoValue":
            return NO_VALUE
        raise UnsupportedTemplate(f"!Ref {name}: not a parameter or a provisioned resource")

    def get_att(self, logical_id: str, attribute: str) -> str:
        """The value of ``!GetAtt logical_id.attribute``."""
        try:
            return self.attributes[(logical_id, attribute)]
        except KeyError:
            raise UnsupportedTemplate(
                f"!GetAtt {logical_id}.{attribute}: not provisioned or not modelled"
            ) from None

    def resolve(self, value: Any) -> Any:
        """Resolve every intrinsic function in ``value``; ``AWS::NoValue`` entries are dropped."""
        if isinstance(value, list):
            items = (self.resolve(item) for item in value)
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            handler = self._intrinsics().get(key)
            if handler is not None:
                return handler(arg)
            if key.startswith("Fn::"):
                raise UnsupportedTemplate(f"intrinsic {key} is not supported")
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def _intrinsics(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "Ref": self.ref,
            "Fn::GetAtt": lambda arg: self.get_att(*self.resolve(arg)),
            "Fn::Sub": self._sub,
            "Fn::If": self._if,
            "Fn::Join": lambda arg: str(arg[0]).join(
                _scalar_text(item) for item in self.resolve(arg[1])
            ),
            "Fn::Select": lambda arg: self.resolve(arg[1])[int(self.resolve(arg[0]))],
            "Fn::Split": lambda arg: str(self.resolve(arg[1])).split(str(arg[0])),
            "Fn::FindInMap": self._find_in_map,
            "Fn::Equals": self._condition_value_of("Fn::Equals"),
            "Fn::Not": self._condition_value_of("Fn::Not"),
            "Fn::And": self._condition_value_of("Fn::And"),
            "Fn::Or": self._condition_value_of("Fn::Or"),
        }

    def _condition_value_of(self, key: str) -> Callable[[Any], bool]:
        return lambda arg: self._condition_value({key: arg})

    def _if(self, arg: Any) -> Any:
        name, when_true, when_false = arg
        return self.resolve(when_true if self.condition(name) else when_false)

    def _find_in_map(self, arg: Any) -> Any:
        name, first, second = (self.resolve(item) for item in arg)
        return self.template["Mappings"][name][first][second]

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, str):
            text, variables = arg, {}
        else:
            text, variables = arg[0], arg[1]

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):  # ${!Literal} stands for the text ${Literal}
                return "${" + name[1:] + "}"
            if name in variables:
                return _scalar_text(self.resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.get_att(logical_id, attribute)
            return _scalar_text(self.ref(name))

        return _SUB_VARIABLE.sub(replace, text)


def _scalar_text(value: Any) -> str:
    """A scalar as CloudFormation turns it into a string (booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise UnsupportedTemplate(f"expected a scalar, got {value!r}")


def _references(value: Any) -> set[str]:
    """Logical ids and parameter names that ``value`` refers to (Ref, GetAtt, Sub)."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= _references(item)
    elif isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                target = arg.split(".", 1)[0] if isinstance(arg, str) else arg[0]
                found.add(str(target))
            elif key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                for name in _SUB_VARIABLE.findall(text):
                    found.add(name.split(".", 1)[0])
                if not isinstance(arg, str):
                    found |= _references(arg[1])
            else:
                found |= _references(arg)
    return found


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class SqsEventSource:
    """An SQS event source mapping: which queue feeds which function, and how."""

    function: str
    queue: str
    queue_url: str
    queue_arn: str
    batch_size: int
    report_batch_item_failures: bool
    #: ``MaximumBatchingWindowInSeconds``: how long the mapping may gather a batch (0: none).
    batching_window: int = 0


@dataclass(frozen=True)
class ProvisionedStack:
    """What :func:`provision` made, and what each function would see on Lambda
    (``bucket_name`` and ``table_name`` are empty for a stack without the records bucket and
    the catalogue table of template.yaml)."""

    stack_name: str
    account_id: str
    region: str
    bucket_name: str
    table_name: str
    buckets: Mapping[str, str]
    tables: Mapping[str, str]
    queue_urls: Mapping[str, str]
    queue_arns: Mapping[str, str]
    function_timeouts: Mapping[str, int]
    code_uris: Mapping[str, str]
    sqs_event_sources: Mapping[str, SqsEventSource]
    environments: Mapping[str, Mapping[str, str]]
    moto_omissions: tuple[str, ...]
    resolver: Resolver = field(repr=False, compare=False)

    def function_env(self, logical_id: str) -> dict[str, str]:
        """The environment of function ``logical_id``: Globals merged with its own variables."""
        return dict(self.environments[logical_id])

    def consumer_of(self, queue_logical_id: str) -> str:
        """Logical id of the function that the queue ``queue_logical_id`` feeds."""
        for source in self.sqs_event_sources.values():
            if source.queue == queue_logical_id:
                return source.function
        raise KeyError(queue_logical_id)

    def resolve(self, value: Any) -> Any:
        """Resolve intrinsic functions in a piece of the template against this stack."""
        return self.resolver.resolve(value)


# --------------------------------------------------------------------------- provisioning


def _attribute_text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return _scalar_text(value)


def _only(props: Mapping[str, Any], known: set[str], logical_id: str) -> None:
    unknown = set(props) - known
    if unknown:
        raise UnsupportedTemplate(
            f"{logical_id}: properties {sorted(unknown)} are not reproduced in moto; "
            "teach cdif_harvester/cli/moto_stack.py to create them"
        )


class _Provisioner:
    def __init__(self, resolver: Resolver, stack_name: str, region: str) -> None:
        self.resolver = resolver
        self.stack_name = stack_name
        self.region = region
        self.sqs = boto3.client("sqs", region_name=region)
        self.s3 = boto3.client("s3", region_name=region)
        self.dynamodb = boto3.client("dynamodb", region_name=region)
        self.queues: dict[str, str] = {}
        self.buckets: dict[str, str] = {}
        self.tables: dict[str, str] = {}
        self.omissions: list[str] = []

    def generated_name(self, logical_id: str, limit: int) -> str:
        # CloudFormation adds a random suffix; a fixed name keeps tests deterministic.
        return f"{self.stack_name}-{logical_id}"[:limit]

    def create(self, logical_id: str, kind: str, props: dict[str, Any]) -> None:
        creators: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "AWS::SQS::Queue": self.queue,
            "AWS::SQS::QueuePolicy": self.queue_policy,
            "AWS::S3::Bucket": self.bucket,
            "AWS::S3::BucketPolicy": self.bucket_policy,
            "AWS::DynamoDB::Table": self.table,
        }
        creators[kind](logical_id, props)

    def queue(self, logical_id: str, props: dict[str, Any]) -> None:
        name = props.get("QueueName") or self.generated_name(logical_id, 80)
        if props.get("FifoQueue") and not name.endswith(".fifo"):
            name += ".fifo"
        attributes: Any = {
            key: _attribute_text(value)
            for key, value in props.items()
            if key not in {"QueueName", "Tags"}
        }
        tags = {tag["Key"]: tag["Value"] for tag in props.get("Tags", [])}
        url = self.sqs.create_queue(QueueName=name, Attributes=attributes, tags=tags)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.queues[logical_id] = url
        self.resolver.refs[logical_id] = url
        self.resolver.attributes.update(
            {
                (logical_id, "Arn"): arn,
                (logical_id, "QueueName"): name,
                (logical_id, "QueueUrl"): url,
            }
        )

    def queue_policy(self, logical_id: str, props: dict[str, Any]) -> None:
        _only(props, {"Queues", "PolicyDocument"}, logical_id)
        for url in props["Queues"]:
            self.sqs.set_queue_attributes(
                QueueUrl=url, Attributes={"Policy": json.dumps(props["PolicyDocument"])}
            )
        self.resolver.refs[logical_id] = logical_id

    def bucket(self, logical_id: str, props: dict[str, Any]) -> None:
        _only(
            props,
            {
                "BucketName",
                "VersioningConfiguration",
                "BucketEncryption",
                "PublicAccessBlockConfiguration",
                "OwnershipControls",
                "LifecycleConfiguration",
                "NotificationConfiguration",
                "Tags",
            },
            logical_id,
        )
        name = props.get("BucketName") or self.generated_name(logical_id, 63).lower()
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", name):
            raise UnsupportedTemplate(f"{logical_id}: {name!r} is not a valid bucket name")
        if self.region == "us-east-1":
            self.s3.create_bucket(Bucket=name)
        else:
            self.s3.create_bucket(
                Bucket=name,
                CreateBucketConfiguration={"LocationConstraint": self.region},  # type: ignore[typeddict-item]
            )
        self.buckets[logical_id] = name
        self.resolver.refs[logical_id] = name
        self.resolver.attributes.update(
            {
                (logical_id, "Arn"): f"arn:aws:s3:::{name}",
                (logical_id, "DomainName"): f"{name}.s3.amazonaws.com",
                (logical_id, "RegionalDomainName"): f"{name}.s3.{self.region}.amazonaws.com",
            }
        )
        if "VersioningConfiguration" in props:
            self.s3.put_bucket_versioning(
                Bucket=name, VersioningConfiguration=props["VersioningConfiguration"]
            )
        if "BucketEncryption" in props:
            rules: Any = [
                {
                    "ApplyServerSideEncryptionByDefault"
                    if key == "ServerSideEncryptionByDefault"
                    else key: value
                    for key, value in rule.items()
                }
                for rule in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            ]
            self.s3.put_bucket_encryption(
                Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules}
            )
        if "PublicAccessBlockConfiguration" in props:
            self.s3.put_public_access_block(
                Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"]
            )
        if "OwnershipControls" in props:
            self.s3.put_bucket_ownership_controls(
                Bucket=name, OwnershipControls=props["OwnershipControls"]
            )
        if "LifecycleConfiguration" in props:
            self.s3.put_bucket_lifecycle_configuration(
                Bucket=name,
                LifecycleConfiguration=_lifecycle_configuration(props["LifecycleConfiguration"]),
            )
        if "Tags" in props:
            self.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": props["Tags"]})
        if "NotificationConfiguration" in props:
            self.s3.put_bucket_notification_configuration(
                Bucket=name,
                NotificationConfiguration=_notification_configuration(
                    logical_id, props["NotificationConfiguration"]
                ),
            )

    def bucket_policy(self, logical_id: str, props: dict[str, Any]) -> None:
        _only(props, {"Bucket", "PolicyDocument"}, logical_id)
        document = dict(props["PolicyDocument"])
        statements = document["Statement"]
        statements = [statements] if isinstance(statements, dict) else statements
        document["Statement"] = [s for s in statements if not _moto_misreads(s)]
        for statement in statements:
            if _moto_misreads(statement):
                self.omissions.append(
                    f"{logical_id}: statement {statement.get('Sid', '?')} not applied "
                    "(moto ignores its condition and would deny every request)"
                )
        if document["Statement"]:
            self.s3.put_bucket_policy(Bucket=props["Bucket"], Policy=json.dumps(document))
        self.resolver.refs[logical_id] = logical_id

    def table(self, logical_id: str, props: dict[str, Any]) -> None:
        _only(
            props,
            {
                "TableName",
                "AttributeDefinitions",
                "KeySchema",
                "BillingMode",
                "ProvisionedThroughput",
                "GlobalSecondaryIndexes",
                "LocalSecondaryIndexes",
                "StreamSpecification",
                "SSESpecification",
                "PointInTimeRecoverySpecification",
                "TimeToLiveSpecification",
                "TableClass",
                "DeletionProtectionEnabled",
                "Tags",
            },
            logical_id,
        )
        name = props.get("TableName") or self.generated_name(logical_id, 255)
        request: dict[str, Any] = {
            "TableName": name,
            "AttributeDefinitions": props["AttributeDefinitions"],
            "KeySchema": props["KeySchema"],
        }
        for key in (
            "BillingMode",
            "ProvisionedThroughput",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "TableClass",
            "DeletionProtectionEnabled",
            "Tags",
        ):
            if key in props:
                request[key] = props[key]
        if "StreamSpecification" in props:
            request["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
        if "SSESpecification" in props:
            sse = props["SSESpecification"]
            request["SSESpecification"] = {
                "Enabled": sse["SSEEnabled"],
                **{key: sse[key] for key in ("SSEType", "KMSMasterKeyId") if key in sse},
            }
        description = self.dynamodb.create_table(**request)["TableDescription"]
        if "PointInTimeRecoverySpecification" in props:
            self.dynamodb.update_continuous_backups(
                TableName=name,
                PointInTimeRecoverySpecification={
                    "PointInTimeRecoveryEnabled": props["PointInTimeRecoverySpecification"][
                        "PointInTimeRecoveryEnabled"
                    ]
                },
            )
        if "TimeToLiveSpecification" in props:
            self.dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification=props["TimeToLiveSpecification"]
            )
        self.tables[logical_id] = name
        self.resolver.refs[logical_id] = name
        self.resolver.attributes[(logical_id, "Arn")] = description["TableArn"]
        if "LatestStreamArn" in description:
            self.resolver.attributes[(logical_id, "StreamArn")] = description["LatestStreamArn"]


def _moto_misreads(statement: Mapping[str, Any]) -> bool:
    """Moto evaluates only StringEquals in bucket policies and treats other conditions as met."""
    conditions = statement.get("Condition", {})
    return statement.get("Effect") == "Deny" and any(op != "StringEquals" for op in conditions)


def _lifecycle_configuration(config: Mapping[str, Any]) -> Any:
    """A CloudFormation LifecycleConfiguration in the shape of the S3 API."""
    return {"Rules": [_lifecycle_rule(rule) for rule in config["Rules"]]}


def _lifecycle_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule in the shape of the S3 API."""
    converted: dict[str, Any] = {"Status": rule["Status"]}
    for key, value in rule.items():
        if key == "Id":
            converted["ID"] = value
        elif key == "Status":
            continue
        elif key == "Prefix":
            converted["Filter"] = {"Prefix": value}
        elif key == "ExpirationInDays":
            converted["Expiration"] = {"Days": value}
        elif key == "NoncurrentVersionExpiration":
            converted["NoncurrentVersionExpiration"] = {"NoncurrentDays": value["NoncurrentDays"]}
        elif key == "NoncurrentVersionExpirationInDays":
            converted["NoncurrentVersionExpiration"] = {"NoncurrentDays": value}
        elif key == "AbortIncompleteMultipartUpload":
            converted["AbortIncompleteMultipartUpload"] = value
        else:
            raise UnsupportedTemplate(f"lifecycle rule property {key} is not reproduced in moto")
    converted.setdefault("Filter", {"Prefix": ""})
    return converted


def _notification_configuration(logical_id: str, config: Mapping[str, Any]) -> Any:
    """A CloudFormation NotificationConfiguration in the shape of the S3 API (queues only)."""
    _only(config, {"QueueConfigurations"}, f"{logical_id}.NotificationConfiguration")
    queues = []
    for item in config["QueueConfigurations"]:
        converted: dict[str, Any] = {"QueueArn": item["Queue"], "Events": [item["Event"]]}
        rules = item.get("Filter", {}).get("S3Key", {}).get("Rules", [])
        if rules:
            converted["Filter"] = {
                "Key": {"FilterRules": [{"Name": r["Name"], "Value": r["Value"]} for r in rules]}
            }
        queues.append(converted)
    return {"QueueConfigurations": queues}


def provision(
    template_path: Path = TEMPLATE_PATH,
    *,
    stack_name: str = STACK_NAME,
    account_id: str = ACCOUNT_ID,
    region: str = REGION,
    parameters: Mapping[str, str] | None = None,
) -> ProvisionedStack:
    """Create the template's queues, bucket and table in moto; call inside ``mock_aws``.

    Raises :class:`UnsupportedTemplate` for a resource property or intrinsic function that this
    module does not reproduce.
    """
    template = load_template(template_path)
    resolver = Resolver.for_template(
        template,
        stack_name=stack_name,
        account_id=account_id,
        region=region,
        parameters=parameters,
    )
    resources: dict[str, Any] = template["Resources"]
    chosen = {
        lid: res
        for lid, res in resources.items()
        if res["Type"] in PROVISIONED_TYPES
        and ("Condition" not in res or resolver.condition(res["Condition"]))
    }
    graph: dict[str, set[str]] = {}
    for lid, res in chosen.items():
        depends = res.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else depends
        graph[lid] = (_references(res.get("Properties", {})) | set(depends)) & set(chosen)
    provisioner = _Provisioner(resolver, stack_name, region)
    for lid in TopologicalSorter(graph).static_order():
        res = chosen[lid]
        provisioner.create(lid, res["Type"], resolver.resolve(res.get("Properties", {})))

    globals_ = template.get("Globals", {}).get("Function", {})
    environments: dict[str, Mapping[str, str]] = {}
    timeouts: dict[str, int] = {}
    code_uris: dict[str, str] = {}
    sources: dict[str, SqsEventSource] = {}
    queue_by_arn = {resolver.get_att(lid, "Arn"): lid for lid in provisioner.queues}
    for lid in function_ids(template):
        props = resources[lid].get("Properties", {})
        variables = {
            **globals_.get("Environment", {}).get("Variables", {}),
            **props.get("Environment", {}).get("Variables", {}),
        }
        environments[lid] = MappingProxyType(
            {key: _scalar_text(value) for key, value in resolver.resolve(variables).items()}
        )
        timeouts[lid] = int(resolver.resolve(props.get("Timeout", globals_.get("Timeout", 3))))
        code_uris[lid] = str(props.get("CodeUri", globals_.get("CodeUri", "")))
        for event in props.get("Events", {}).values():
            if event["Type"] != "SQS":
                continue
            if lid in sources:
                raise UnsupportedTemplate(f"{lid} has more than one SQS event source")
            event_props = resolver.resolve(event["Properties"])
            arn = event_props["Queue"]
            sources[lid] = SqsEventSource(
                function=lid,
                queue=queue_by_arn[arn],
                queue_url=provisioner.queues[queue_by_arn[arn]],
                queue_arn=arn,
                batch_size=int(event_props.get("BatchSize", 10)),
                report_batch_item_failures="ReportBatchItemFailures"
                in event_props.get("FunctionResponseTypes", []),
                batching_window=int(event_props.get("MaximumBatchingWindowInSeconds", 0)),
            )

    return ProvisionedStack(
        stack_name=stack_name,
        account_id=account_id,
        region=region,
        # A stack that uses another's data (the renderer's) has neither.
        bucket_name=provisioner.buckets.get(RECORDS_BUCKET_ID, ""),
        table_name=provisioner.tables.get(CATALOG_TABLE_ID, ""),
        buckets=MappingProxyType(provisioner.buckets),
        tables=MappingProxyType(provisioner.tables),
        queue_urls=MappingProxyType(provisioner.queues),
        queue_arns=MappingProxyType(
            {lid: resolver.get_att(lid, "Arn") for lid in provisioner.queues}
        ),
        function_timeouts=MappingProxyType(timeouts),
        code_uris=MappingProxyType(code_uris),
        sqs_event_sources=MappingProxyType(sources),
        environments=MappingProxyType(environments),
        moto_omissions=tuple(provisioner.omissions),
        resolver=resolver,
    )


@contextmanager
def mocked_stack(
    template_path: Path = TEMPLATE_PATH,
    *,
    parameters: Mapping[str, str] | None = None,
) -> Iterator[ProvisionedStack]:
    """Enter ``mock_aws``, provision the template's data resources, and yield the stack."""
    from moto import mock_aws  # noqa: PLC0415 - moto is a dev dependency

    with mock_aws():
        yield provision(template_path, parameters=parameters)


def sqs_event(
    messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str = REGION
) -> dict[str, Any]:
    """The Lambda SQS event for ``messages`` as returned by ``receive_message``.

    Ask ``receive_message`` for ``AttributeNames=["All"]`` and ``MessageAttributeNames=["All"]``
    to carry the attributes over.
    """
    records = []
    for message in messages:
        attributes = {
            key: str(value)
            for key, value in message.get("Attributes", {}).items()
            if key
            in {
                "ApproximateReceiveCount",
                "SentTimestamp",
                "SenderId",
                "ApproximateFirstReceiveTimestamp",
                "MessageGroupId",
                "MessageDeduplicationId",
                "SequenceNumber",
            }
        }
        message_attributes = {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": list(value.get("StringListValues", [])),
                "binaryListValues": list(value.get("BinaryListValues", [])),
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        }
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": attributes,
                "messageAttributes": message_attributes,
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        )
    return {"Records": records}
