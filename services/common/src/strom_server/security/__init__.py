"""Server-side security: TLS listeners, login tokens, SCRAM users, the ACL authorizer and its
etcd watch, the request guard every service installs, and the audit log (docs/security.md)."""
