"""The Spark Connect URL: a token is added for dialling only, and never kept in what is logged or stored."""

import pytest

from connectors.spark_session import connect_url_of, with_token, without_secrets


def test_a_token_is_added_as_a_url_parameter():
    assert with_token("sc://h:1", "s3cret") == "sc://h:1/;token=s3cret"
    assert with_token("sc://h:1/;use_ssl=true", "s3cret") == "sc://h:1/;use_ssl=true;token=s3cret"
    assert with_token("sc://h:1/;use_ssl=true", None) == "sc://h:1/;use_ssl=true"


def test_a_url_with_a_token_of_its_own_and_a_second_token_is_refused():
    with pytest.raises(ValueError, match="keep one"):
        with_token("sc://h:1/;token=a", "b")


def test_secrets_are_dropped_from_what_is_logged_or_stored():
    assert without_secrets("sc://h:1/;use_ssl=true;token=s3cret;user_id=u") == "sc://h:1/;use_ssl=true;user_id=u"
    assert without_secrets("sc://h:1") == "sc://h:1"


class _Session:
    session_id = "abc"


def test_the_watchdog_url_keeps_the_token_and_names_the_session():
    assert connect_url_of("sc://h:1/;use_ssl=true;token=t", _Session()) == \
        "sc://h:1/;use_ssl=true;token=t;session_id=abc"
