import urllib.request

from tests.support.moto import MotoEndpoint


def test_moto_server_answers_on_loopback(moto: MotoEndpoint) -> None:
    assert moto.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{moto.url}/moto-api/data.json", timeout=10) as response:
        assert response.status == 200
