"""Domain errors: every refused command raises one of these, with a message a user can act on.

DomainError
├── InvalidCommand          the command itself is malformed (bad id, bad URL, negative duration)
├── ConnectionNotFound      the command names a connection that was never started
├── ConnectionConflict      START of a running connection with a different URL
├── ConnectionStopped       acquire of a connection whose desired state is STOPPED
├── LeaseUnavailable        acquire while another lease is live, or during upstream back-off
├── LeaseLost               renew/release/end by a worker that is not the current owner or token
├── SessionNotLive          acquire or renew for a worker session that expired, ended or never was
├── CheckpointRegressed     a checkpoint lower than the one already recorded
└── InvalidTransition       an event that cannot follow the state it is applied to
"""


class DomainError(Exception):
    """Root of every error the domain raises."""


class InvalidCommand(DomainError):
    pass


class ConnectionNotFound(DomainError):
    pass


class ConnectionConflict(DomainError):
    pass


class ConnectionStopped(DomainError):
    pass


class LeaseUnavailable(DomainError):
    pass


class LeaseLost(DomainError):
    pass


class SessionNotLive(DomainError):
    pass


class CheckpointRegressed(DomainError):
    pass


class InvalidTransition(DomainError):
    pass
