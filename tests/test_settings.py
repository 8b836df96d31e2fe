"""The server's settings (eventq/settings.py): flags and environment variables."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from eventq.settings import GROUPS, Settings, add_arguments, build_settings, was_given


def settings_of(*argv: str, **env: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return build_settings(parser.parse_args(list(argv)), env)


def test_the_http_port_is_host_port_a_port_or_off_and_actions_a_switch():
    assert Settings().http_address == ("127.0.0.1", 9980)
    assert settings_of("--http-port", "9999").http_address == ("127.0.0.1", 9999)
    assert settings_of("--http-port", "0.0.0.0:0").http_address == ("0.0.0.0", 0)
    assert settings_of("--http-port", "off").http_address is None
    assert settings_of("--http-actions").http_actions is True
    assert settings_of("--http-actions", "no").http_actions is False
    assert settings_of(EVENTQ_HTTP_ACTIONS="1").http_actions is True
    for bad in ("nine", "1:2:x", "70000", "host:"):
        with pytest.raises(ValueError, match="http_port"):
            Settings(http_port=bad)


def test_partitions_are_given_by_a_flag_or_a_variable_not_by_the_default():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert not was_given("partitions", parser.parse_args([]), {})
    assert was_given("partitions", parser.parse_args(["--partitions", "4"]), {})
    assert was_given("partitions", parser.parse_args([]), {"EVENTQ_PARTITIONS": "4"})
    assert not was_given("partitions", parser.parse_args([]), {"EVENTQ_LISTEN_PORT": "1"})


def help_sections(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """``--help``'s headings, in order, each with the flags listed under it."""
    sections: dict[str, list[str]] = {}
    for line in parser.format_help().splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            flags = sections.setdefault(line[:-1], [])
        elif line.startswith("  --"):
            flags.append(line.split()[0])
    return sections


def test_help_lists_every_setting_with_its_help_under_its_groups_heading():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sections = help_sections(parser)
    assert list(sections)[1:] == [f"{group.title} settings" for group in GROUPS]
    for item in fields(Settings):
        assert item.metadata["help"] and item.metadata["group"] in GROUPS, item.name
        heading = f"{item.metadata['group'].title} settings"
        assert "--" + item.name.replace("_", "-") in sections[heading], item.name


def test_a_command_that_lists_a_few_settings_shows_only_their_groups():
    parser = argparse.ArgumentParser()
    add_arguments(parser, ("listen_host", "listen_port"))
    assert help_sections(parser) == {
        "options": [], "server settings": ["--listen-host", "--listen-port"]}
