"""The connector's accessKey/secretKey: parsed once into SessionCredentials on source and sink, both or neither; the
secret appears in no repr of the options or of a partition, in no option error, and reaches the resolver through
its environment (owner-readable), never its command line (what ``ps`` shows everyone)."""

from __future__ import annotations

import pickle

import pytest

from broker.common.errors import ConnectorError, ConnectorOptionError
from broker.remoting.signing import SessionCredentials
from connector.options import SinkOptions, SourceOptions
from connector.resolver import ACCESS_KEY_ENV, SECRET_KEY_ENV, credentials_env, env_credentials
from connector.source import QueueRange

SECRET = "s3cr3t-value"
KEYS = {"accessKey": "alice", "secretKey": SECRET}


def test_the_keys_are_parsed_once_and_the_secret_is_never_printed() -> None:
    source = SourceOptions.parse({"namesrvAddr": "127.0.0.1:9876", "topic": "T", **KEYS}, streaming=False)
    sink = SinkOptions.parse({"namesrvAddr": "127.0.0.1:9876", "topic": "T", **KEYS}, streaming=False)
    assert source.credentials == sink.credentials == SessionCredentials("alice", SECRET)
    part = QueueRange("T", "b", 0, 0, 1, "127.0.0.1:10911", "127.0.0.1:9876", "g", None, "TAG", 32, 1000, True,
                      source.credentials)
    for shown in (repr(source), str(source), repr(sink), repr(part)):
        assert "alice" in shown and SECRET not in shown
    assert pickle.loads(pickle.dumps(part)).credentials.secret_key == SECRET  # executors get it, pickled
    for given in ({"secretKey": SECRET}, {"accessKey": "alice"}, {"accessKey": "alice", "secretKey": " "}):
        with pytest.raises(ConnectorOptionError, match="accessKey and secretKey go together") as err:
            SourceOptions.parse({"namesrvAddr": "n:1", "topic": "T", **given}, streaming=True)
        assert SECRET not in str(err.value)
    assert SourceOptions.parse({"namesrvAddr": "n:1", "topic": "T"}, streaming=True).credentials is None


def test_the_resolver_gets_the_keys_in_its_environment() -> None:
    env = credentials_env(SessionCredentials("alice", SECRET))
    assert (env[ACCESS_KEY_ENV], env[SECRET_KEY_ENV]) == ("alice", SECRET)
    assert env_credentials(env) == SessionCredentials("alice", SECRET)
    assert ACCESS_KEY_ENV not in credentials_env(None) and env_credentials(credentials_env(None)) is None
    with pytest.raises(ConnectorError, match="go together"):
        env_credentials({ACCESS_KEY_ENV: "alice"})
