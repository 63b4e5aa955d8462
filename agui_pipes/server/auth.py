"""Who is asking: principals, the ``authorize=`` hook's contract and two built-in authenticators.

A server with ``authorize=`` calls it with the Starlette ``Request`` before it
reads a body, for every route it serves (the run POST, ``runs/{id}``, stop,
``threads/…``, the inspector). The callable returns who the caller is — a
:class:`Principal`, or just its scope string — or raises:

* :class:`Unauthorized` — no or bad credentials: 401 with ``WWW-Authenticate``;
* :class:`Forbidden` — known caller, not allowed here: 403.

Anything else it raises is a bug in the hook, answered 500
``authorization_failed`` (logged once with its traceback), never a stream.

The **scope** is the tenant: runs and threads are keyed by (scope, id), so two
principals with different scopes cannot see, stop or join each other's runs.
Principals with the same scope share them. Without ``authorize=`` every caller is
:data:`ANONYMOUS`, whose scope is :data:`DEFAULT_SCOPE` (also the scope of event
logs written before scopes existed).

Built in, for ``agui-pipes serve``: :class:`TokenFile` (``--auth-tokens``: one
``TOKEN SCOPE`` pair per line) and :class:`JWTAuthenticator` (``--auth-jwt``,
through PyJWT — the ``auth`` extra).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .._foundation.errors import AguiPipesError
from .._foundation.principal import (
    ANONYMOUS,
    DEFAULT_SCOPE,
    MAX_SCOPE_LENGTH,
    Principal,
    current_principal,
    scope_problem,
    using_principal,
)
from .._lazy import public_dir

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "ANONYMOUS",
    "DEFAULT_SCOPE",
    "MAX_SCOPE_LENGTH",
    "AuthConfigError",
    "AuthError",
    "AuthorizationFailed",
    "Authorize",
    "Forbidden",
    "JWTAuthenticator",
    "Principal",
    "TokenFile",
    "Unauthorized",
    "authenticate",
    "bearer_token",
    "current_principal",
    "scope_problem",
    "using_principal",
]
__dir__ = public_dir(__all__)

# Defined below the store and the driver (which key by and carry them); this is
# their public home, as pickle and repr report it.
for _value in (Principal, current_principal, scope_problem, using_principal):
    _value.__module__ = __name__
del _value

REALM: Final = "agui-pipes"


Authorize: TypeAlias = Callable[["Request"], "Principal | str | Awaitable[Principal | str]"]
"""``authorize=``: the request in, who it is from out (or raise Unauthorized / Forbidden)."""


class AuthError(AguiPipesError):
    """A request refused for who it is (or is not): :class:`Unauthorized` or :class:`Forbidden`."""

    status: int = 403
    code: str = "forbidden"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def headers(self) -> dict[str, str]:
        """Extra response headers (the 401 challenge)."""
        return {}


class Unauthorized(AuthError):
    """No credentials, or credentials that do not check out: 401 with a Bearer challenge.

    ``error`` is RFC 6750's code: None when the request carried no credentials at
    all, ``invalid_token`` for a bad, expired or unknown one.
    """

    status = 401
    code = "unauthorized"

    def __init__(self, message: str, *, error: str | None = "invalid_token") -> None:
        super().__init__(message)
        self.error = error

    def headers(self) -> dict[str, str]:
        challenge = f'Bearer realm="{REALM}"'
        if self.error is not None:
            description = self.message.replace("\\", "").replace('"', "'")
            challenge += f', error="{self.error}", error_description="{description}"'
        return {"www-authenticate": challenge}


class Forbidden(AuthError):
    """A known caller that may not do this: 403."""

    status = 403
    code = "forbidden"


class AuthorizationFailed(AguiPipesError):
    """The ``authorize=`` hook itself broke (raised something other than an AuthError)."""


class AuthConfigError(AguiPipesError, ValueError):
    """A tokens, secret or JWKS file that cannot be read or parsed (names the file and line)."""


async def authenticate(authorize: Authorize | None, request: Request) -> Principal:
    """Run the hook for ``request``: the :class:`Principal`, an :class:`AuthError`, or
    :class:`AuthorizationFailed` chaining whatever else the hook raised."""
    if authorize is None:
        return ANONYMOUS
    try:
        answer = authorize(request)
        if inspect.isawaitable(answer):
            answer = await answer
    except AuthError:
        raise
    except Exception as exc:
        raise AuthorizationFailed(f"the authorize hook raised {type(exc).__name__}: {exc}") from exc
    if isinstance(answer, str):
        problem = scope_problem(answer)
        if problem is not None:
            raise AuthorizationFailed(f"the authorize hook returned a bad scope: {problem}")
        return Principal(answer)
    if isinstance(answer, Principal):
        return answer
    raise AuthorizationFailed(
        f"the authorize hook returned {type(answer).__name__}; it returns a Principal or "
        "a scope string, or raises Unauthorized / Forbidden"
    )


def bearer_token(request: Request) -> str:
    """The token of ``Authorization: Bearer …``, or :class:`Unauthorized` (no ``error``)."""
    header = request.headers.get("authorization")
    if header is None:
        raise Unauthorized("this server needs a bearer token (Authorization: Bearer …)", error=None)
    kind, _, token = header.strip().partition(" ")
    token = token.strip()
    if kind.lower() != "bearer" or not token:
        raise Unauthorized(
            "the Authorization header is not 'Bearer <token>'", error="invalid_request"
        )
    return token


def _digest(token: str) -> bytes:
    # Comparing fixed-length digests keeps compare_digest's time independent of the
    # length of the token that was sent.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenFile:
    """``--auth-tokens FILE``: static bearer tokens, one ``TOKEN SCOPE`` pair per line.

    ``#`` starts a comment, blank lines are skipped, a token appears once. Every
    known token is compared (in constant time each) on every request, so how long
    a refusal takes says nothing about which tokens exist. :meth:`reload` re-reads
    the file (``serve`` calls it on SIGHUP); a file that no longer parses leaves the
    previous tokens in force and raises :class:`AuthConfigError`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # Reentrant: serve reloads from a SIGHUP handler, which a second SIGHUP may interrupt.
        self._lock = threading.RLock()
        self._tokens: tuple[tuple[bytes, Principal], ...] = self._read()

    def __len__(self) -> int:
        return len(self._tokens)

    def _read(self) -> tuple[tuple[bytes, Principal], ...]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AuthConfigError(f"{self.path}: cannot read the tokens file: {exc}") from exc
        seen: dict[bytes, int] = {}
        entries: list[tuple[bytes, Principal]] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise AuthConfigError(
                    f"{self.path}:{number}: expected 'TOKEN SCOPE' (two words), got "
                    f"{len(parts)} word{'s' if len(parts) != 1 else ''}"
                )
            token, scope = parts
            problem = scope_problem(scope)
            if problem is not None:
                raise AuthConfigError(f"{self.path}:{number}: {problem}")
            digest = _digest(token)
            if digest in seen:
                raise AuthConfigError(
                    f"{self.path}:{number}: this token is already on line {seen[digest]}"
                )
            seen[digest] = number
            entries.append((digest, Principal(scope, subject=f"token:{self.path.name}:{number}")))
        if not entries:
            raise AuthConfigError(
                f"{self.path}: no 'TOKEN SCOPE' lines (every request would be refused)"
            )
        return tuple(entries)

    def reload(self) -> int:
        """Re-read the file; the number of tokens now in force."""
        tokens = self._read()
        with self._lock:
            self._tokens = tokens
        return len(tokens)

    def principal_for(self, token: str) -> Principal:
        """The principal of ``token``, or :class:`Unauthorized`."""
        sent = _digest(token)
        found: Principal | None = None
        for digest, principal in self._tokens:
            if hmac.compare_digest(sent, digest) and found is None:
                found = principal
        if found is None:
            raise Unauthorized("unknown bearer token")
        return found

    def __call__(self, request: Request) -> Principal:
        return self.principal_for(bearer_token(request))


class JWTAuthenticator:
    """``--auth-jwt``: bearer JWTs checked with PyJWT (the ``auth`` extra).

    Exactly one key source: ``secret_file`` (an HMAC secret, HS256/384/512) or
    ``jwks_file`` (a JSON Web Key Set, RS*/ES*/PS*/EdDSA; the token's ``kid``
    picks the key). ``audience`` and ``issuer`` are checked when given; ``exp`` and
    ``nbf`` always are, with ``leeway`` seconds of clock skew. The principal's
    scope is the ``scope_claim`` claim (``sub`` by default), a string.
    """

    def __init__(
        self,
        *,
        secret_file: str | Path | None = None,
        jwks_file: str | Path | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | None = None,
        scope_claim: str = "sub",
        algorithms: Sequence[str] | None = None,
        leeway: float = 30.0,
    ) -> None:
        try:
            import jwt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "JWT authentication needs PyJWT: pip install 'agui-pipes[auth]'"
            ) from exc
        self._jwt = jwt
        if (secret_file is None) == (jwks_file is None):
            raise AuthConfigError(
                "JWT authentication needs exactly one of a secret file "
                "(--jwt-secret-file) or a JWKS file (--jwt-jwks-file)"
            )
        self.audience = audience
        self.issuer = issuer
        self.scope_claim = scope_claim
        self.leeway = leeway
        self._secret: bytes | None = None
        self._keys: dict[str | None, Any] = {}
        if secret_file is not None:
            self._secret = self._read_secret(Path(secret_file))
            self.algorithms = list(algorithms or ("HS256", "HS384", "HS512"))
        else:
            assert jwks_file is not None
            self._keys = self._read_jwks(Path(jwks_file))
            self.algorithms = list(
                algorithms
                or (
                    "RS256",
                    "RS384",
                    "RS512",
                    "ES256",
                    "ES384",
                    "ES512",
                    "PS256",
                    "PS384",
                    "PS512",
                    "EdDSA",
                )
            )

    @staticmethod
    def _read_secret(path: Path) -> bytes:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise AuthConfigError(f"{path}: cannot read the JWT secret file: {exc}") from exc
        if len(secret) < 32:
            raise AuthConfigError(
                f"{path}:1: a JWT HMAC secret is at least 32 bytes, got {len(secret)}"
            )
        return secret

    def _read_jwks(self, path: Path) -> dict[str | None, Any]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AuthConfigError(f"{path}: cannot read the JWKS file: {exc}") from exc
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AuthConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from exc
        try:
            key_set = self._jwt.PyJWKSet.from_dict(document)
        except Exception as exc:  # PyJWT raises several kinds for a bad set
            raise AuthConfigError(f"{path}:1: not a usable JSON Web Key Set: {exc}") from exc
        keys: dict[str | None, Any] = {}
        for key in key_set.keys:
            keys[key.key_id] = key
        return keys

    def _key_for(self, token: str) -> Any:
        if self._secret is not None:
            return self._secret
        try:
            header = self._jwt.get_unverified_header(token)
        except self._jwt.PyJWTError as exc:
            raise Unauthorized(f"malformed token: {exc}") from exc
        kid = header.get("kid")
        key = self._keys.get(kid)
        if key is None and kid is None and len(self._keys) == 1:
            key = next(iter(self._keys.values()))
        if key is None:
            raise Unauthorized("the token's key id is not in the key set")
        return key.key

    def principal_for(self, token: str) -> Principal:
        """The principal a valid token names, or :class:`Unauthorized`."""
        jwt = self._jwt
        options: dict[str, Any] = {"require": ["exp"]}
        try:
            claims = jwt.decode(
                token,
                self._key_for(token),
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options=options,
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthorized("the token has expired") from exc
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"invalid token: {exc}") from exc
        scope = claims.get(self.scope_claim)
        problem = scope_problem(scope)
        if problem is not None:
            raise Unauthorized(
                f"the token's {self.scope_claim!r} claim cannot be a scope: {problem}"
            )
        assert isinstance(scope, str)
        subject = claims.get("sub")
        return Principal(
            scope, subject=subject if isinstance(subject, str) else None, claims=claims
        )

    def __call__(self, request: Request) -> Principal:
        return self.principal_for(bearer_token(request))
