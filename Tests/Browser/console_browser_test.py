"""The console in a real browser: headless Chromium driven by Selenium against a real `tern serve`.

Run by scripts/console-browser-test.sh, which starts the server and passes TERN_URL, TERN_ADMIN_TOKEN and
TERN_SIMULATOR_CONTROL. It signs in (a wrong secret first, which is refused), creates an app on the simulator,
registers devices through the HTTP API, finds one on the devices page, composes a push to their tag with the preview
showing, sends it and sees it completed, broadcasts to a channel from its page and sees it listed, and checks every
page fits a phone's width. With TERN_CONSOLE_SCREENSHOTS
set to a folder, it saves each page there at 1280 and 390 pixels wide.
"""

import base64
import json
import os
import secrets
import sys
import time
import urllib.request
import uuid

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

URL = os.environ["TERN_URL"]
ADMIN = os.environ["TERN_ADMIN_TOKEN"]
SIMULATOR = os.environ["TERN_SIMULATOR_CONTROL"]
SHOTS = os.environ.get("TERN_CONSOLE_SCREENSHOTS")
DESKTOP, PHONE = 1280, 390
APP = "browser-demo"

checks = 0


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        raise AssertionError(message)


def api(method, path, secret, body=None, device_secret=None):
    request = urllib.request.Request(URL + path, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Authorization", "Bearer " + secret)
    if device_secret:
        request.add_header("X-Tern-Device-Secret", device_secret)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read()
        return json.loads(text) if text else None


def browser():
    options = Options()
    options.binary_location = os.environ.get("TERN_CHROMIUM", "/usr/bin/chromium")
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={DESKTOP},900",
                     "--force-color-profile=srgb", "--hide-scrollbars", "--lang=en-US"]:
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(os.environ.get("TERN_CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)
    driver.set_page_load_timeout(20)
    return driver


def wait(driver, condition, seconds=15, message=""):
    # The live pages redraw their parts as they poll: an element read while it is replaced is read again.
    return WebDriverWait(driver, seconds, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)).until(condition, message)


def text_of(driver, selector):
    try:
        return driver.find_element(By.CSS_SELECTOR, selector).text
    except WebDriverException as error:
        # Chrome reports an element replaced between the find and the read this way too, not only as stale.
        if "does not belong to the document" in str(error):
            raise StaleElementReferenceException(str(error)) from error
        raise


def fits(driver, width, name):
    """The page does not scroll sideways at this width (wide tables scroll inside their own box)."""
    overflow = driver.execute_script("return document.documentElement.scrollWidth")
    check(overflow <= width, f"{name} is {overflow}px wide at {width}px")


def shoot(driver, name, after=None):
    """Checks the page at a phone's width; saves it at both widths when asked."""
    for width in (DESKTOP, PHONE):
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": 900 if width == DESKTOP else 844, "deviceScaleFactor": 1, "mobile": width == PHONE})
        time.sleep(0.2)
        if after:
            after()
        fits(driver, width, name)
        # From the top, nothing focused: a screenshot of the page as it opens.
        driver.execute_script("window.scrollTo(0, 0); if (document.activeElement) { document.activeElement.blur(); }")
        if SHOTS:
            height = driver.execute_script("return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)")
            shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
            with open(os.path.join(SHOTS, f"{name}-{'desktop' if width == DESKTOP else 'phone'}.png"), "wb") as file:
                file.write(base64.b64decode(shot["data"]))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def main():
    started = time.monotonic()
    driver = browser()
    try:
        run(driver)
    except Exception:
        print("console browser test: failed on", driver.current_url, file=sys.stderr)
        print(driver.page_source[:4000], file=sys.stderr)
        raise
    finally:
        driver.quit()
    print(f"console browser test: {checks} checks passed in {time.monotonic() - started:.1f} s")


def run(driver):
    # Signed out, the console asks for a secret; a wrong one is refused and no session starts.
    driver.get(URL + "/console")
    wait(driver, EC.url_contains("/console/sign-in"))
    check(driver.title.startswith("Sign in"), "the sign-in page")
    shoot(driver, "sign-in")
    driver.find_element(By.ID, "secret").send_keys("tat_not-the-admin-token")
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait(driver, EC.presence_of_element_located((By.ID, "problem")))
    check("that is not the admin token" in text_of(driver, "#problem"), "a wrong secret is refused")
    check(driver.get_cookie("tern_console") is None, "no session for a wrong secret")

    # The admin token signs in.
    driver.find_element(By.ID, "secret").send_keys(ADMIN)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait(driver, EC.presence_of_element_located((By.ID, "overview")))
    check("Signed in: admin" in text_of(driver, ".who"), "signed in as the admin")
    cookie = driver.get_cookie("tern_console")
    check(cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", f"a strict HttpOnly cookie: {cookie}")

    # A new app on the built-in simulator: no Apple credentials needed.
    driver.get(URL + "/console/apps")
    driver.find_element(By.ID, "id").send_keys(APP)
    driver.find_element(By.ID, "topic").send_keys("com.example.browser")
    Select(driver.find_element(By.ID, "environment")).select_by_value("simulator")
    driver.find_element(By.CSS_SELECTOR, "form[action='/console/apps'] button[type=submit]").click()
    wait(driver, EC.presence_of_element_located((By.CSS_SELECTOR, "code.secret")))
    values = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "code.secret")]
    app_key = next(value for value in values if value.startswith("tak_"))
    master = next((value for value in values if value.startswith("tms_")), None)
    check(master is not None, "the new app's master secret is shown once")
    shoot(driver, "app-created")
    driver.get(URL + "/console/apps")
    check(APP in text_of(driver, "table"), "the new app is listed")
    shoot(driver, "apps")
    driver.get(URL + f"/console/apps/{APP}")
    shoot(driver, "app-settings")

    # Two phones register through the HTTP API, as the app would; the second is then uninstalled.
    phones = []
    for _ in range(2):
        device, token = str(uuid.uuid4()), secrets.token_hex(32)
        registered = api("PUT", f"/v1/apps/{APP}/devices/{device}", app_key,
                         {"token": token, "environment": "production", "tags": ["browser", "beta"], "locale": "en_GB", "appVersion": "2.1"})
        phones.append((device, token, registered["deviceSecret"]))
    urllib.request.urlopen(urllib.request.Request(
        f"{SIMULATOR}/tokens/{phones[1][1]}/unregister", method="POST",
        data=json.dumps({"timestamp": int(time.time() * 1000) + 60_000}).encode()), timeout=10)

    # Find the first by its tag, then open it.
    driver.get(URL + f"/console/apps/{APP}/devices")
    Select(driver.find_element(By.ID, "by")).select_by_value("tag")
    driver.find_element(By.ID, "q").send_keys("browser")
    driver.find_element(By.CSS_SELECTOR, "form.search button").click()
    wait(driver, EC.presence_of_element_located((By.ID, "found")))
    check(phones[0][0] in text_of(driver, "table"), "the device is found by its tag")
    shoot(driver, "devices")
    driver.find_element(By.LINK_TEXT, phones[0][0]).click()
    wait(driver, EC.title_contains("Device"))
    check(phones[0][1] in driver.page_source, "the device's page shows its token")

    # Compose a push to the tag: the server's preview and the audience count follow the form.
    driver.get(URL + f"/console/apps/{APP}/compose")
    driver.find_element(By.ID, "audience-values").send_keys("browser")
    driver.find_element(By.ID, "title").send_keys("Hello from the console")
    driver.find_element(By.ID, "body").send_keys("Your order has shipped.")
    driver.find_element(By.ID, "badge").send_keys("1")
    driver.find_element(By.ID, "data").send_keys('{"orderId": 17}')
    wait(driver, lambda d: "Hello from the console" in text_of(d, "#payload-preview") and "orderId" in text_of(d, "#payload-preview"),
         message="the preview shows the payload")
    wait(driver, lambda d: "Reaches 2 devices now." in text_of(d, "#audience-estimate"), message="the audience is counted")
    preview = json.loads(text_of(driver, "#payload-preview"))
    # The push's id goes beside aps once it is sent; the preview holds a stand-in of the same length.
    check(preview == {"aps": {"alert": {"title": "Hello from the console", "body": "Your order has shipped."}, "badge": 1}, "orderId": 17,
                      "tern": {"pushId": "00000000-0000-4000-8000-000000000000"}},
          f"the preview is the APNs payload: {preview}")
    size = text_of(driver, "#payload-size")
    check(size == f"{len(text_of(driver, '#payload-preview').encode())} of 4,096 bytes", f"the byte meter: {size}")
    # A mistake shows at once, in the API's words; corrected, it goes.
    priority = Select(driver.find_element(By.ID, "priority"))
    driver.find_element(By.ID, "data").send_keys(",")
    wait(driver, lambda d: "not valid JSON" in text_of(d, "[data-field=problem]"), message="bad JSON is reported")
    driver.find_element(By.ID, "data").send_keys("\b")
    wait(driver, lambda d: not d.find_element(By.CSS_SELECTOR, "[data-field=problem]").is_displayed(), message="the problem clears")
    priority.select_by_value("10")
    shoot(driver, "compose", after=lambda: wait(driver, lambda d: "orderId" in text_of(d, "#payload-preview")))
    driver.find_element(By.ID, "send").click()

    # The push's page follows it until it is completed.
    wait(driver, EC.url_contains(f"/console/apps/{APP}/pushes/"))
    wait(driver, lambda d: text_of(d, "[data-field=status]") == "completed", seconds=30, message="the push completes")
    check(text_of(driver, "[data-field=accepted]") == "1", "one phone accepted it")
    check(text_of(driver, "[data-field=failed]") == "1", "the uninstalled one failed")
    check("Unregistered" in driver.page_source, "and why")
    check(text_of(driver, "[data-field=opened]") == "0", "nobody opened it yet")
    check(text_of(driver, "[data-field=received]") == "0", "no extension reported its arrival")
    # The first phone's user opens it: its app reports the push's id, and the page counts it.
    push_id = driver.current_url.rstrip("/").split("/")[-1]
    api("POST", f"/v1/apps/{APP}/devices/{phones[0][0]}/opens", app_key, {"pushId": push_id}, device_secret=phones[0][2])
    driver.refresh()
    wait(driver, lambda d: text_of(d, "[data-field=opened]") == "1", message="the open is counted")
    shoot(driver, "push")

    driver.get(URL + f"/console/apps/{APP}/pushes")
    check("completed" in text_of(driver, "table"), "the push is listed, completed")
    shoot(driver, "pushes")
    driver.get(URL + f"/console/apps/{APP}/token-events")
    check(phones[1][1] in driver.page_source, "the uninstalled phone's token event")
    shoot(driver, "token-events")
    driver.get(URL + f"/console/apps/{APP}/devices/{phones[1][0]}")
    check("deactivated" in text_of(driver, ".facts"), "the device page says why its token was deactivated")
    shoot(driver, "device")

    # A broadcast channel made from the Live Activities page: its page broadcasts to it and lists what was sent, with
    # APNs' answer, and deletes it once its name is typed.
    driver.get(URL + f"/console/apps/{APP}/activities")
    driver.find_element(By.ID, "channel-name").send_keys("final-2026")
    Select(driver.find_element(By.ID, "storage")).select_by_value("mostRecent")
    driver.find_element(By.CSS_SELECTOR, "form[action$='/broadcast-channels'] button[type=submit]").click()
    wait(driver, EC.presence_of_element_located((By.ID, "contentState")))
    channel = api("GET", f"/v1/apps/{APP}/broadcast-channels/final-2026", master)
    check(channel["storage"] == "mostRecent", "the channel was made as the form said")
    driver.get(URL + f"/console/apps/{APP}/activities")
    driver.find_element(By.LINK_TEXT, "final-2026").click()
    wait(driver, EC.presence_of_element_located((By.ID, "contentState")))
    check(text_of(driver, "#channel-id") == channel["channelId"], "the channel's page shows the id phones subscribe to")
    driver.find_element(By.ID, "contentState").send_keys('{"home": 2, "away": 1, "minute": 88}')
    driver.find_element(By.ID, "alertTitle").send_keys("Goal!")
    driver.find_element(By.CSS_SELECTOR, "form[action$='/broadcasts'] button[type=submit]").click()
    wait(driver, lambda d: "delivered" in text_of(d, "#broadcasts"), message="the broadcast is listed, delivered")
    check('{"away":1,"home":2,"minute":88}' in text_of(driver, "#broadcasts"), "with the content state sent")
    taken = json.loads(urllib.request.urlopen(f"{SIMULATOR}/broadcasts", timeout=10).read())["items"]
    check(len(taken) == 1 and taken[0]["channelID"] == channel["channelId"], "the simulator took one broadcast to the channel")
    shoot(driver, "channel")
    driver.find_element(By.ID, "confirm").send_keys("final-2026")
    driver.find_element(By.CSS_SELECTOR, "form[action$='/delete'] button[type=submit]").click()
    wait(driver, EC.url_contains("/activities"))
    check("The app has no broadcast channel." in text_of(driver, "main"), "the deleted channel is no longer listed")
    kept = json.loads(urllib.request.urlopen(f"{SIMULATOR}/channels", timeout=10).read())["channels"]
    check(all(c["id"] != channel["channelId"] for c in kept), "and APNs forgot it")

    # The overview counts what was sent (its data refreshes every two seconds).
    driver.get(URL + "/console")
    wait(driver, lambda d: int(text_of(d, "[data-field=notifications]") or 0) >= 2, seconds=20, message="the overview counts the push")
    wait(driver, lambda d: int(text_of(d, "[data-field=opens]") or 0) >= 1, seconds=20, message="and its open")
    shoot(driver, "overview")

    # Signing out ends the session.
    driver.find_element(By.CSS_SELECTOR, ".sign-out button").click()
    wait(driver, EC.url_contains("/console/sign-in"))
    driver.get(URL + "/console")
    wait(driver, EC.url_contains("/console/sign-in"))


if __name__ == "__main__":
    main()
