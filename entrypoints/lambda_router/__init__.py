"""The Lambda event router behind API Gateway (REST, proxy integration).

Handler: `entrypoints.lambda_router.handler.handler`. The routes, validation and status codes
are the event API's (entrypoints/api), documented in `openapi.yaml` beside this file.
"""
