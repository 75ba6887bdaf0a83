"""A template bundle as a request body: Heat's create body, as
python-heatclient sends it (converge/template/loader.py:
bundle_from_request reads it), and where the template was read from."""


def fields(bundle):
    """{'template', 'files', 'environment', 'template_base_url'} of a
    Bundle the CLI read from the disk.

    The template goes as its text, so the server's errors name its lines.
    Its files are keyed by their file:// URLs while the template names
    them relative to itself: python-heatclient rewrites the template's
    references to those keys, which the stack then shows (a provider's
    resource type would read file:///...); converge sends the template as
    written with its URL instead (`template_base_url`), which the server
    resolves the references against, as embedded."""
    body = {'template': bundle.source_text or bundle.template,
            'files': dict(bundle.files),
            'environment': dict(bundle.environment)}
    if bundle.base_url:
        body['template_base_url'] = bundle.base_url
    return body
