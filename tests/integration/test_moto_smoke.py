import urllib.request

from entrypoints.devstack.aws import LocalAws


def test_moto_server_answers_on_loopback(aws: LocalAws) -> None:
    assert aws.moto_url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{aws.moto_url}/moto-api/data.json", timeout=10) as response:
        assert response.status == 200
