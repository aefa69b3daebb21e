"""The operator's contact in the User-Agent: a real server on 127.0.0.1 records the header it
receives, from the local runner (option, environment variable, command line) and from the AWS
wiring built from the template's parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdif_harvester import CONTACT_URL, PRODUCT, __version__, aws_runtime
from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.contact import CONTACT_ENV, InvalidContact, check_contact
from cdif_harvester.demo.server import PublisherSite
from tests.support.aws import mocked_stack
from tests.support.pipeline import function_environment

pytestmark = pytest.mark.network


def _agents(site: PublisherSite) -> set[str]:
    return {headers.get("user-agent", "") for _, _, headers in site.requests}


def test_the_local_runner_names_the_operators_contact(
    site: PublisherSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTACT_ENV, raising=False)
    with LocalHarvester(
        tmp_path / "a", allow_loopback=True, contact="https://ops.example.org/crawler"
    ) as harvester:
        harvester.harvest(site.url("/robots.txt"))
    assert _agents(site) == {f"{PRODUCT}/{__version__} (+https://ops.example.org/crawler)"}


def test_the_environment_variable_sets_it_and_the_default_is_the_projects_page(
    site: PublisherSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTACT_ENV, "crawler@ops.example.org")
    with LocalHarvester(tmp_path / "a", allow_loopback=True) as harvester:
        harvester.harvest(site.url("/robots.txt"))
    assert _agents(site) == {f"{PRODUCT}/{__version__} (+mailto:crawler@ops.example.org)"}
    site.requests.clear()
    monkeypatch.delenv(CONTACT_ENV)
    with LocalHarvester(tmp_path / "b", allow_loopback=True) as harvester:
        harvester.harvest(site.url("/robots.txt"))
    assert _agents(site) == {f"{PRODUCT}/{__version__} (+{CONTACT_URL})"}


def test_the_command_line_option_wins_and_a_bad_contact_is_refused(
    site: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(CONTACT_ENV, "https://env.example.org/")
    out = str(tmp_path / "out")
    url = site.url("/robots.txt")
    argv = ["harvest", url, "--out", out, "--allow-loopback", "--quiet"]
    main([*argv, "--operator-contact", "https://cli.example.org/"])
    assert _agents(site) == {f"{PRODUCT}/{__version__} (+https://cli.example.org/)"}
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--operator-contact", "me (call me)"])
    assert exit_.value.code == 2
    assert "--operator-contact" in capsys.readouterr().err
    monkeypatch.setenv(CONTACT_ENV, "not a contact")
    site.requests.clear()
    assert main(argv) == 2
    assert CONTACT_ENV in capsys.readouterr().err
    assert site.requests == []  # refused before anything was asked


@pytest.mark.parametrize(
    "text", ["", "ftp://x.example.org/", "https://x.example.org/a b", "x)", "ünï@x.org", "x\r\n"]
)
def test_what_cannot_go_in_a_user_agent_is_refused(text: str) -> None:
    with pytest.raises(InvalidContact):
        check_contact(text)


@pytest.mark.aws
def test_the_template_parameter_reaches_the_functions_user_agent(site: PublisherSite) -> None:
    contact = "https://harvest.example.org/contact"
    with mocked_stack(parameters={"OperatorContact": contact}) as stack:
        assert stack.function_env("UrlResolverFunction")["OPERATOR_CONTACT"] == contact
        with function_environment(stack, "UrlResolverFunction", ALLOW_LOOPBACK="true"):
            aws_runtime.wiring().fetcher.fetch(site.url("/robots.txt"))
    assert _agents(site) == {f"{PRODUCT}/{__version__} (+{contact})"}


@pytest.mark.aws
def test_a_bad_contact_in_the_functions_environment_is_a_configuration_error() -> None:
    env = {"RECORDS_BUCKET": "b", "CATALOG_TABLE": "t", "OPERATOR_CONTACT": "(nobody)"}
    with pytest.raises(aws_runtime.ConfigError, match="OPERATOR_CONTACT"):
        aws_runtime.AwsConfig.from_env(env)
