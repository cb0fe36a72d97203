/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_CHARDEV_H
#define ME_CHARDEV_H

#define ME_DEVICE_NAME	"multiedge"

int me_chardev_init(void);
void me_chardev_uninit(void);

#endif /* ME_CHARDEV_H */
