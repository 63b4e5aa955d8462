"""agui_pipes.server.auth: principals, the authorize hook's contract, tokens and JWTs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.requests import Request

from agui_pipes.server.auth import (
    ANONYMOUS,
    DEFAULT_SCOPE,
    AuthConfigError,
    AuthorizationFailed,
    Forbidden,
    JWTAuthenticator,
    Principal,
    TokenFile,
    Unauthorized,
    authenticate,
)

SECRET = "s" * 40


def _request(authorization: str | None = None) -> Request:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


# --- principals --------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["", "a" * 257, "tab\there", "nl\n", "del\x7f"])
def test_a_principal_refuses_a_scope_that_cannot_key_a_store(scope: str) -> None:
    with pytest.raises(ValueError, match="scope"):
        Principal(scope)


def test_anonymous_is_the_default_scope() -> None:
    assert ANONYMOUS.scope == DEFAULT_SCOPE


# --- authenticate: the hook's contract ----------------------------------------------


@pytest.mark.anyio
async def test_no_hook_means_anonymous() -> None:
    assert await authenticate(None, _request()) is ANONYMOUS


@pytest.mark.anyio
async def test_a_hook_may_return_a_scope_string_or_be_async() -> None:
    async def hook(request: Request) -> str:
        return "alice"

    assert await authenticate(lambda request: "bob", _request()) == Principal("bob")
    assert await authenticate(hook, _request()) == Principal("alice")


@pytest.mark.anyio
async def test_auth_errors_pass_and_other_errors_become_authorization_failed() -> None:
    def refuses(request: Request) -> Principal:
        raise Forbidden("not you")

    def breaks(request: Request) -> Principal:
        raise KeyError("oops")

    with pytest.raises(Forbidden):
        await authenticate(refuses, _request())
    with pytest.raises(AuthorizationFailed, match="KeyError") as caught:
        await authenticate(breaks, _request())
    assert isinstance(caught.value.__cause__, KeyError)
    with pytest.raises(AuthorizationFailed, match="returned int"):
        await authenticate(lambda request: 3, _request())  # type: ignore[arg-type,return-value]
    with pytest.raises(AuthorizationFailed, match="bad scope"):
        await authenticate(lambda request: "", _request())


def test_unauthorized_carries_a_bearer_challenge() -> None:
    assert Unauthorized("x", error=None).headers() == {
        "www-authenticate": 'Bearer realm="agui-pipes"'
    }
    challenge = Unauthorized('bad "token"').headers()["www-authenticate"]
    assert challenge == (
        'Bearer realm="agui-pipes", error="invalid_token", error_description="bad \'token\'"'
    )
    assert Unauthorized("x").status == 401 and Forbidden("x").status == 403


# --- TokenFile -----------------------------------------------------------------------


def _tokens(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    return path


def test_tokens_map_to_their_scopes(tmp_path: Path) -> None:
    path = _tokens(tmp_path, "# team tokens\nalpha-token alice\n\nbeta-token bob  # ops\n")
    tokens = TokenFile(path)
    assert len(tokens) == 2
    assert tokens(_request("Bearer alpha-token")).scope == "alice"
    assert tokens(_request("bearer  beta-token ")).scope == "bob"
    with pytest.raises(Unauthorized, match="unknown bearer token"):
        tokens(_request("Bearer gamma"))
    with pytest.raises(Unauthorized) as missing:
        tokens(_request())
    assert missing.value.error is None
    with pytest.raises(Unauthorized) as basic:
        tokens(_request("Basic YWxhZGRpbjpvcGVu"))
    assert basic.value.error == "invalid_request"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("one-word\n", ":1: expected 'TOKEN SCOPE'"),
        ("ok alice\nthree words here\n", ":2: expected 'TOKEN SCOPE'"),
        ("a alice\na bob\n", ":2: this token is already on line 1"),
        ("# nothing\n", "no 'TOKEN SCOPE' lines"),
        ("t " + "x" * 300 + "\n", ":1: a scope is at most 256"),
    ],
)
def test_a_bad_tokens_file_names_file_and_line(tmp_path: Path, text: str, where: str) -> None:
    path = _tokens(tmp_path, text)
    with pytest.raises(AuthConfigError) as caught:
        TokenFile(path)
    assert str(path) in str(caught.value) and where in str(caught.value)


def test_an_unreadable_tokens_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="cannot read"):
        TokenFile(tmp_path / "missing")


def test_reload_swaps_tokens_and_keeps_the_old_ones_on_a_bad_file(tmp_path: Path) -> None:
    path = _tokens(tmp_path, "old alice\n")
    tokens = TokenFile(path)
    path.write_text("new alice\n")
    assert tokens.reload() == 1
    assert tokens(_request("Bearer new")).scope == "alice"
    with pytest.raises(Unauthorized):
        tokens(_request("Bearer old"))
    path.write_text("broken\n")
    with pytest.raises(AuthConfigError):
        tokens.reload()
    assert tokens(_request("Bearer new")).scope == "alice"


# --- JWTAuthenticator -----------------------------------------------------------------


def _secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    return path


def _hs(claims: dict[str, Any]) -> str:
    return jwt.encode({"exp": int(time.time()) + 60, **claims}, SECRET, algorithm="HS256")


def test_a_jwt_names_its_scope_by_the_configured_claim(tmp_path: Path) -> None:
    by_sub = JWTAuthenticator(secret_file=_secret_file(tmp_path))
    principal = by_sub(_request("Bearer " + _hs({"sub": "alice", "org": "acme"})))
    assert principal.scope == "alice" and principal.subject == "alice"
    assert principal.claims["org"] == "acme"
    by_org = JWTAuthenticator(secret_file=_secret_file(tmp_path), scope_claim="org")
    assert by_org(_request("Bearer " + _hs({"sub": "alice", "org": "acme"}))).scope == "acme"
    with pytest.raises(Unauthorized, match="'org' claim"):
        by_org(_request("Bearer " + _hs({"sub": "alice"})))


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (
            jwt.encode({"sub": "a", "exp": int(time.time()) - 3600}, SECRET, algorithm="HS256"),
            "expired",
        ),
        (
            jwt.encode({"sub": "a", "exp": int(time.time()) + 60}, "t" * 40, algorithm="HS256"),
            "invalid token",
        ),
        (jwt.encode({"sub": "a"}, SECRET, algorithm="HS256"), "invalid token"),
        ("not.a.jwt", "invalid token"),
    ],
)
def test_bad_jwts_are_unauthorized(tmp_path: Path, token: str, message: str) -> None:
    check = JWTAuthenticator(secret_file=_secret_file(tmp_path))
    with pytest.raises(Unauthorized, match=message):
        check(_request("Bearer " + token))


def test_audience_and_issuer_are_checked(tmp_path: Path) -> None:
    check = JWTAuthenticator(
        secret_file=_secret_file(tmp_path), audience="agents", issuer="https://id.example"
    )
    good = _hs({"sub": "a", "aud": "agents", "iss": "https://id.example"})
    assert check(_request("Bearer " + good)).scope == "a"
    for claims in (
        {"sub": "a", "aud": "other", "iss": "https://id.example"},
        {"sub": "a", "aud": "agents", "iss": "https://evil.example"},
        {"sub": "a"},
    ):
        with pytest.raises(Unauthorized):
            check(_request("Bearer " + _hs(claims)))


def test_a_jwks_file_verifies_by_key_id(tmp_path: Path) -> None:
    keys = {
        kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ("k1", "k2")
    }
    jwks = {
        "keys": [
            {
                **json.loads(RSAAlgorithm.to_jwk(key.public_key())),
                "kid": kid,
                "use": "sig",
                "alg": "RS256",
            }
            for kid, key in keys.items()
        ]
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    check = JWTAuthenticator(jwks_file=path)
    claims = {"sub": "carol", "exp": int(time.time()) + 60}
    token = jwt.encode(claims, keys["k2"], algorithm="RS256", headers={"kid": "k2"})
    assert check(_request("Bearer " + token)).scope == "carol"
    wrong = jwt.encode(claims, keys["k1"], algorithm="RS256", headers={"kid": "k2"})
    with pytest.raises(Unauthorized):
        check(_request("Bearer " + wrong))
    unknown = jwt.encode(claims, keys["k1"], algorithm="RS256", headers={"kid": "k9"})
    with pytest.raises(Unauthorized, match="key id"):
        check(_request("Bearer " + unknown))
    # An HMAC token signed with the public key text (algorithm confusion) is refused.
    confused = jwt.encode(claims, SECRET, algorithm="HS256", headers={"kid": "k1"})
    with pytest.raises(Unauthorized):
        check(_request("Bearer " + confused))


@pytest.mark.parametrize(
    ("text", "where"), [("{not json", ":1: not JSON"), ('{"keys": 3}', "JSON Web Key Set")]
)
def test_a_bad_jwks_file_names_file_and_line(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(text)
    with pytest.raises(AuthConfigError) as caught:
        JWTAuthenticator(jwks_file=path)
    assert str(path) in str(caught.value) and where in str(caught.value)


def test_jwt_config_needs_one_key_source_and_a_long_secret(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="exactly one"):
        JWTAuthenticator()
    short = tmp_path / "short"
    short.write_text("tiny")
    with pytest.raises(AuthConfigError, match="at least 32 bytes"):
        JWTAuthenticator(secret_file=short)
